package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/controller/driver"
	// Hardware types offered by `kiln serve`; each registers itself in init.
	_ "github.com/kilnhq/kiln/controller/driver/ipmi"
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot"
	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
)

// shutdownDrivers logs out of the BMC sessions the drivers keep open; serve
// calls it once the API and the conductor have stopped.
func shutdownDrivers(ctx context.Context) error { return redfish.Shutdown(ctx) }

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
	_ redfish.ISOBuilder   = agentISOs{}
	_ redfish.ISOValidator = agentISOs{}
)

func (a agentISOs) BuildISO(ctx context.Context, n *proto.Node, p redfish.ISOParams) (string, error) {
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
