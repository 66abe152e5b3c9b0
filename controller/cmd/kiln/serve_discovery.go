package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/inspectrules"
)

// discoveryOptions are the flags of enroll-on-discovery and inspection rules.
type discoveryOptions struct {
	driver string
	rules  string
}

func addDiscoveryFlags(f *pflag.FlagSet, o *discoveryOptions) {
	f.StringVar(&o.driver, "discovery-driver", api.DefaultDiscoveryDriver, "driver of machines enrolled by discovery (--boot-unknown discovery) before the inspection rules run")
	f.StringVar(&o.rules, "inspection-rules", "", "YAML or JSON file of inspection rules (Ironic's format) run on every inspected node and on each machine discovery enrolls (docs/network-boot.md)")
}

// load reads the rules file and, when unknown machines boot into the agent,
// the discovery settings. Errors name the flag.
func (o discoveryOptions) load(bootUnknown string, log *slog.Logger) (*api.Discovery, *inspectrules.Set, error) {
	var rules *inspectrules.Set
	if o.rules != "" {
		var err error
		if rules, err = inspectrules.LoadFile(o.rules); err != nil {
			return nil, nil, fmt.Errorf("--inspection-rules: %w", err)
		}
		log.Info("inspection rules loaded", "file", o.rules, "rules", rules.Len())
	}
	if _, ok := driver.Lookup(o.driver); !ok {
		return nil, nil, fmt.Errorf("--discovery-driver: no hardware type %q (kiln driver list shows them)", o.driver)
	}
	if bootUnknown != "discovery" {
		return nil, rules, nil
	}
	return &api.Discovery{Driver: o.driver, Rules: rules}, rules, nil
}
