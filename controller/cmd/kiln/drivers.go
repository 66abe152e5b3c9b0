package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/controller/driver"
	// The hardware types `kiln serve` offers; each registers itself.
	_ "github.com/kilnhq/kiln/controller/driver/standard"
	"github.com/kilnhq/kiln/proto"
)

// loadDrivers builds every hardware type with this controller's settings:
// its logger and its virtual-media ISOs. It returns what logs out of the
// BMC sessions the drivers keep open, for serve to call once the API and
// the conductor have stopped.
func loadDrivers(o serveOptions, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	files := strings.TrimSuffix(o.apiURL, "/") + "/boot/files"
	// Virtual media: per-node agent ISOs under --boot-dir/iso/.
	mediaFiles := files
	if o.mediaURL != "" {
		if u, err := url.Parse(o.mediaURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--media-url %q: want http(s)://host[:port]", o.mediaURL)
		}
		mediaFiles = strings.TrimSuffix(o.mediaURL, "/") + "/boot/files"
	}
	media := agentISOs{
		b:        boot.NewISOBuilder(boot.ISOConfig{Dir: o.bootDir, FilesURL: mediaFiles, AgentCA: o.trust.agentCAPEM}),
		filesURL: files, console: o.bootConsole,
	}
	var mu sync.Mutex
	var hooks []func(context.Context) error
	env := driver.Env{Log: log, Media: media, OnShutdown: func(f func(context.Context) error) {
		mu.Lock()
		defer mu.Unlock()
		hooks = append(hooks, f)
	}}
	if err := driver.Load(env); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		var errs []error
		for _, f := range hooks {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}, nil
}

// agentISOs builds redfish-virtual-media ISOs on this controller: a node's
// deploy_iso when it names one, else a per-node ISO of the agent in
// --boot-dir with the node's kernel arguments, agent token and, for a host
// without DHCP, its preprovisioning network data.
type agentISOs struct {
	b        *boot.ISOBuilder
	filesURL string
	console  string
}

var (
	_ driver.ISOBuilder   = agentISOs{}
	_ driver.ISOValidator = agentISOs{}
)

func (a agentISOs) BuildISO(ctx context.Context, n *proto.Node, p driver.ISOParams) (string, error) {
	if u, _ := n.DriverInfo["deploy_iso"].(string); u != "" {
		return u, nil
	}
	kernel, err := a.localName(p.Kernel)
	if err != nil {
		return "", err
	}
	ramdisk, err := a.localName(p.Ramdisk)
	if err != nil {
		return "", err
	}
	extra := []string{"console=" + a.console}
	if s, ok := n.DriverInfo["kernel_append_params"].(string); ok {
		extra = append(extra, strings.Fields(s)...)
	}
	data, err := driver.NetworkData(n)
	if err != nil {
		return "", err
	}
	return a.b.Build(ctx, n.UUID, kernel, ramdisk, boot.Cmdline(p.KernelArgs, extra), data)
}

// localName turns deploy_kernel/deploy_ramdisk into a file of --boot-dir:
// empty (the default), a bare name, or a URL under this controller's
// /boot/files/.
func (a agentISOs) localName(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case strings.HasPrefix(v, a.filesURL+"/"):
		return strings.TrimPrefix(v, a.filesURL+"/"), nil
	case strings.Contains(v, "://"):
		return "", fmt.Errorf("%s: virtual-media ISOs are built from the agent files in --boot-dir; set driver_info deploy_iso to use another image", v)
	}
	return v, nil
}

func (a agentISOs) CleanISO(_ context.Context, n *proto.Node) error {
	if u, _ := n.DriverInfo["deploy_iso"].(string); u != "" {
		return nil
	}
	return a.b.Remove(n.UUID)
}

func (a agentISOs) ValidateISO(n *proto.Node) error {
	if u, _ := n.DriverInfo["deploy_iso"].(string); u != "" {
		return nil
	}
	return a.b.Check()
}
