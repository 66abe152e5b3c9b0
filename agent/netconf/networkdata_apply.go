package netconf

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
)

// NetworkDataOptions configure ApplyNetworkData.
type NetworkDataOptions struct {
	// Cmdline is the kernel command line (/proc/cmdline's content).
	Cmdline string
	// ReadFile reads NetworkDataFile (default os.ReadFile).
	ReadFile func(string) ([]byte, error)
	// Client fetches ArgNetworkDataURL (default http.DefaultClient).
	Client *http.Client
	// KeyfileDir receives NetworkManager keyfiles for the installed
	// system ("" is KeyfileDir; "-" writes none).
	KeyfileDir string
	// ResolvConf overrides the resolver file ("" is /etc/resolv.conf).
	ResolvConf string
	Logger     *slog.Logger
}

// ApplyNetworkData is the ramdisk's static-network path: it loads the
// host's NMState document (LoadNetworkData), applies it (Apply) and writes
// the equivalent keyfiles, which install_coreos copies to the installed
// system when coreos_copy_network is set. It reports false, doing nothing,
// when the host has no network data; the caller then falls back to Bringup
// (DHCP or ip=).
func ApplyNetworkData(ctx context.Context, opts NetworkDataOptions) (bool, error) {
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	doc, src, err := LoadNetworkData(ctx, opts.Cmdline, opts.ReadFile, opts.Client)
	if err != nil || doc == nil {
		return false, err
	}
	cfg, err := ParseNMState(doc)
	if err != nil {
		return false, fmt.Errorf("network data from %s: %w", src, err)
	}
	if opts.ResolvConf != "" {
		cfg.DNS.ResolvConf = opts.ResolvConf
	}
	log.Info("applying network data", "source", src, "interfaces", len(cfg.Interfaces), "routes", len(cfg.Routes))
	if err := Apply(ctx, cfg); err != nil {
		return false, fmt.Errorf("network data from %s: %w", src, err)
	}
	if opts.KeyfileDir != "-" {
		if err := WriteKeyfiles(opts.KeyfileDir, cfg); err != nil {
			return true, fmt.Errorf("network data from %s: %w", src, err)
		}
	}
	return true, nil
}
