package driver

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// ConfigChecker is implemented by interface implementations that can tell
// whether a node's configuration (driver_info, instance_info) is complete
// and well-formed without contacting hardware. GET …/validate uses it, so
// that an API request never waits on a BMC; Validate, which may ask the
// BMC, is for the conductor.
type ConfigChecker interface {
	CheckConfig(n *proto.Node) error
}

// CheckConfig runs impl's offline check; an implementation without one has
// nothing to check.
func CheckConfig(impl any, n *proto.Node) error {
	if c, ok := impl.(ConfigChecker); ok {
		return c.CheckConfig(n)
	}
	return nil
}

// EachImplementation calls fn for every registered interface
// implementation, by kind (power, management, boot, inspect) and name.
func EachImplementation(fn func(kind, name string, impl any)) {
	ensureLoaded()
	implMu.RLock()
	defer implMu.RUnlock()
	each := func(kind string, names []string, get func(string) any) {
		sort.Strings(names)
		for _, n := range names {
			fn(kind, n, get(n))
		}
	}
	each("power", keys(powers), func(n string) any { return powers[n] })
	each("management", keys(managers), func(n string) any { return managers[n] })
	each("boot", keys(boots), func(n string) any { return boots[n] })
	each("inspect", keys(inspectors), func(n string) any { return inspectors[n] })
}

func keys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// capabilityValues are the capabilities whose values Ironic checks, and
// the values it accepts.
var capabilityValues = map[string][]string{
	"boot_mode":   {"bios", "uefi"},
	"boot_option": {"local", "netboot", "ramdisk", "kickstart"},
	"disk_label":  {"msdos", "gpt"},
	"secure_boot": {"true", "false"},
}

// CheckCapabilities checks the capabilities of properties and
// instance_info: a "key:value,…" string or an object, and for boot_mode,
// boot_option, disk_label and secure_boot one of the values Ironic accepts.
func CheckCapabilities(n *proto.Node) error {
	for _, src := range []struct {
		where string
		v     any
	}{{"properties", n.Properties["capabilities"]}, {"instance_info", n.InstanceInfo["capabilities"]}} {
		caps, err := parseCapabilities(src.v)
		if err != nil {
			return fmt.Errorf("%s/capabilities: %w", src.where, err)
		}
		for k, allowed := range capabilityValues {
			v, ok := caps[k]
			if !ok {
				continue
			}
			if !contains(allowed, strings.ToLower(v)) {
				return fmt.Errorf("%s/capabilities: %s %q is not one of %s", src.where, k, v, strings.Join(allowed, ", "))
			}
		}
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// parseCapabilities reads capabilities given as "k:v,k2:v2" or an object.
func parseCapabilities(v any) (map[string]string, error) {
	out := map[string]string{}
	switch c := v.(type) {
	case nil:
	case string:
		if strings.TrimSpace(c) == "" {
			return out, nil
		}
		for _, kv := range strings.Split(c, ",") {
			k, val, ok := strings.Cut(strings.TrimSpace(kv), ":")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("%q is not key:value", strings.TrimSpace(kv))
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	case map[string]any:
		for k, val := range c {
			switch x := val.(type) {
			case string:
				out[k] = x
			case bool:
				out[k] = fmt.Sprint(x)
			default:
				out[k] = fmt.Sprint(x)
			}
		}
	default:
		return nil, fmt.Errorf("must be a string or an object, not %T", v)
	}
	return out, nil
}
