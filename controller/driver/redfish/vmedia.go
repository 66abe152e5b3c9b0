package redfish

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// ISOParams, ISOBuilder and ISOValidator are the controller's ISO
// building, as every hardware type's Env offers it.
type (
	ISOParams    = driver.ISOParams
	ISOBuilder   = driver.ISOBuilder
	ISOValidator = driver.ISOValidator
)

// PrebuiltISO is the ISOBuilder used until the controller provides one: it
// hands out driver_info deploy_iso unchanged, so the kernel arguments and
// the agent token must already be in that image (or reach the agent another
// way).
type PrebuiltISO struct{}

// BuildISO implements ISOBuilder.
func (PrebuiltISO) BuildISO(_ context.Context, n *proto.Node, _ ISOParams) (string, error) {
	u, _ := n.DriverInfo["deploy_iso"].(string)
	if u == "" {
		return "", errors.New("driver_info deploy_iso is not set and no ISO builder is configured for redfish-virtual-media")
	}
	return u, nil
}

// CleanISO implements ISOBuilder.
func (PrebuiltISO) CleanISO(context.Context, *proto.Node) error { return nil }

// ValidateISO implements ISOValidator: without a builder only deploy_iso works.
func (PrebuiltISO) ValidateISO(n *proto.Node) error {
	if u, _ := n.DriverInfo["deploy_iso"].(string); u == "" {
		return errors.New("redfish-virtual-media: this controller has no ISO builder configured; set driver_info deploy_iso")
	}
	return nil
}

// VirtualMediaBoot is the "redfish-virtual-media" boot interface: the agent
// boots from an ISO the BMC attaches as a virtual CD.
type VirtualMediaBoot struct {
	Pool *Pool
	ISO  ISOBuilder
	Mgmt *Management
}

// CarriesAgentToken implements driver.AgentTokenCarrier: an ISO built for
// this boot carries the token; a prebuilt deploy_iso cannot.
func (b *VirtualMediaBoot) CarriesAgentToken(n *proto.Node) bool {
	_, prebuilt := b.ISO.(PrebuiltISO)
	deployISO, _ := n.DriverInfo["deploy_iso"].(string)
	return b.ISO != nil && !prebuilt && deployISO == ""
}

var _ driver.AgentTokenCarrier = (*VirtualMediaBoot)(nil)

// Validate checks driver_info, the image inputs, the network data the ISO
// would carry and that the BMC has a virtual CD drive.
func (b *VirtualMediaBoot) Validate(ctx context.Context, n *proto.Node) error {
	if err := b.CheckConfig(n); err != nil {
		return err
	}
	s, err := b.Pool.open(ctx, n)
	if err != nil {
		return fmt.Errorf("validate redfish driver_info: %w", err)
	}
	if _, err := s.virtualCD(); err != nil {
		return err
	}
	return nil
}

// PrepareRamdisk builds the agent ISO, inserts it (ejecting whatever was
// there), checks the BMC reports it, and sets a one-time boot from CD.
func (b *VirtualMediaBoot) PrepareRamdisk(ctx context.Context, n *proto.Node, p driver.RamdiskParams) error {
	args := map[string]string{}
	for k, v := range p.KernelArgs {
		args[k] = v
	}
	if p.AgentToken != "" {
		args["ipa-agent-token"] = p.AgentToken
	}
	k, _ := n.DriverInfo["deploy_kernel"].(string)
	r, _ := n.DriverInfo["deploy_ramdisk"].(string)
	url, err := b.ISO.BuildISO(ctx, n, ISOParams{Kernel: k, Ramdisk: r, KernelArgs: args})
	if err != nil {
		return fmt.Errorf("build the agent ISO: %w", err)
	}
	s, err := b.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	if err := s.insertMedia(url); err != nil {
		return err
	}
	return s.setBoot(BootPatch{Enabled: string(schemas.OnceBootSourceOverrideEnabled), Target: string(schemas.CdBootSource), Mode: NodeBootMode(n)})
}

// CleanUpRamdisk ejects the ISO and removes it.
func (b *VirtualMediaBoot) CleanUpRamdisk(ctx context.Context, n *proto.Node) error {
	s, err := b.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	if err := s.ejectMedia(); err != nil {
		return err
	}
	return b.ISO.CleanISO(ctx, n)
}

// PrepareInstance ejects the agent ISO and makes the disk the persistent
// boot device.
func (b *VirtualMediaBoot) PrepareInstance(ctx context.Context, n *proto.Node) error {
	if err := b.CleanUpRamdisk(ctx, n); err != nil {
		return err
	}
	return b.Mgmt.SetBootDevice(ctx, n, "disk", true)
}

// virtualCD finds the CD/DVD virtual media of the node's system.
func (s *session) virtualCD() (*schemas.VirtualMedia, error) {
	return s.virtualMediaOf(schemas.CDVirtualMediaType, schemas.DVDVirtualMediaType)
}

// virtualMediaOf finds the first virtual media device of the node's
// system that takes one of types.
func (s *session) virtualMediaOf(types ...schemas.VirtualMediaType) (*schemas.VirtualMedia, error) {
	vms, where, err := s.allVirtualMedia()
	if err != nil {
		return nil, err
	}
	for _, v := range vms {
		for _, t := range types {
			if slices.Contains(v.MediaTypes, t) {
				return v, nil
			}
		}
	}
	return nil, fmt.Errorf("BMC %s: system %s has no virtual %v drive (found %d virtual media devices)", s.endpoint, where, types, len(vms))
}

// allVirtualMedia lists the virtual media of the node's system: under the
// system (Redfish 1.x standard) or under its manager (iDRAC, iLO,
// Supermicro). where names the system.
func (s *session) allVirtualMedia() (vms []*schemas.VirtualMedia, where string, err error) {
	sys, err := s.system()
	if err != nil {
		return nil, "", err
	}
	vms, err = sys.VirtualMedia()
	if err != nil {
		return nil, "", s.fail("list virtual media of "+sys.ODataID, err)
	}
	if len(vms) == 0 {
		mgrs, err := sys.ManagedBy()
		if err != nil {
			return nil, "", s.fail("list managers of "+sys.ODataID, err)
		}
		if len(mgrs) == 0 {
			if mgrs, err = s.api.Service.Managers(); err != nil {
				return nil, "", s.fail("list managers", err)
			}
		}
		for _, m := range mgrs {
			v, err := m.VirtualMedia()
			if err != nil {
				return nil, "", s.fail("list virtual media of "+m.ODataID, err)
			}
			vms = append(vms, v...)
		}
	}
	return vms, sys.ODataID, nil
}

func (s *session) insertMedia(url string) error {
	vm, err := s.virtualCD()
	if err != nil {
		return err
	}
	return s.insertInto(vm, url)
}

// insertInto inserts url into vm, ejecting what it held, and checks the
// BMC reports it.
func (s *session) insertInto(vm *schemas.VirtualMedia, url string) error {
	if vm.Inserted != nil && *vm.Inserted || vm.Image != "" {
		if _, err := vm.EjectMedia(); err != nil {
			return s.fail("eject virtual media "+vm.ODataID+" before inserting", err)
		}
		var err error
		if vm, err = schemas.GetObject[schemas.VirtualMedia](s.api, vm.ODataID); err != nil {
			return s.fail("read virtual media", err)
		}
	}
	yes := true
	params := &schemas.VirtualMediaInsertMediaParameters{Image: url, Inserted: &yes, WriteProtected: &yes}
	for _, q := range s.quirks() {
		if q.Insert != nil {
			q.Insert(params)
		}
	}
	if _, err := vm.InsertMedia(params); err != nil {
		return s.fail(fmt.Sprintf("insert %s into %s", url, vm.ODataID), err)
	}
	got, err := schemas.GetObject[schemas.VirtualMedia](s.api, vm.ODataID)
	if err != nil {
		return s.fail("read virtual media back", err)
	}
	if got.Image != url || got.Inserted != nil && !*got.Inserted {
		return fmt.Errorf("BMC %s accepted %s into %s but reports Image=%q Inserted=%v", s.endpoint, url, vm.ODataID, got.Image, got.Inserted)
	}
	return nil
}

func (s *session) ejectMedia() error {
	vm, err := s.virtualCD()
	if err != nil {
		return err
	}
	return s.ejectFrom(vm)
}

// ejectFrom ejects what vm holds; an empty device is left as it is.
func (s *session) ejectFrom(vm *schemas.VirtualMedia) error {
	if (vm.Inserted == nil || !*vm.Inserted) && vm.Image == "" {
		return nil
	}
	if _, err := vm.EjectMedia(); err != nil {
		return s.fail("eject virtual media "+vm.ODataID, err)
	}
	return nil
}
