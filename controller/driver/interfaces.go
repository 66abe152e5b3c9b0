package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// The interfaces a hardware type is made of. Implementations are registered by
// name (the value of the node's "<iface>_interface" field) and receive the node
// as read-only input: drivers never touch the store, the conductor records what
// they return.

// Power switches a machine on and off out of band.
type Power interface {
	Validate(ctx context.Context, n *proto.Node) error
	GetPowerState(ctx context.Context, n *proto.Node) (proto.PowerState, error)
	// SetPowerState drives the machine to target (power on, power off,
	// rebooting, soft rebooting, soft power off) and returns once the BMC
	// reports it, or fails within timeout.
	SetPowerState(ctx context.Context, n *proto.Node, target proto.PowerState, timeout time.Duration) error
}

// Management sets what the machine boots from next.
type Management interface {
	Validate(ctx context.Context, n *proto.Node) error
	SetBootDevice(ctx context.Context, n *proto.Node, device string, persistent bool) error
}

// RamdiskParams is what a boot interface needs to start the agent.
type RamdiskParams struct {
	// KernelArgs are the agent's kernel arguments (ipa-api-url, …).
	KernelArgs map[string]string
	// AgentToken is pre-generated for virtual media, where the agent cannot
	// look it up safely; empty for network boot.
	AgentToken string
}

// AgentTokenCarrier is implemented by boot interfaces whose boot media can
// carry the agent token on the agent's kernel command line (a virtual-media
// ISO built for this boot). The conductor then pre-generates the token, as
// Ironic does, instead of handing it out at the agent's first lookup.
type AgentTokenCarrier interface {
	CarriesAgentToken(n *proto.Node) bool
}

// Boot prepares how the machine boots: into the agent ramdisk, then into the
// deployed instance.
type Boot interface {
	Validate(ctx context.Context, n *proto.Node) error
	PrepareRamdisk(ctx context.Context, n *proto.Node, p RamdiskParams) error
	CleanUpRamdisk(ctx context.Context, n *proto.Node) error
	// PrepareInstance makes the machine boot the deployed instance next:
	// the disk, persistently (the conductor sets no boot device after it).
	PrepareInstance(ctx context.Context, n *proto.Node) error
}

// InspectResult is what out-of-band inspection learned.
type InspectResult struct {
	Properties proto.Dict
	MACs       []string
	Inventory  any // proto-shaped inventory, when the BMC exposes enough
}

// Inspect finds out what a machine is. Async reports that the agent will
// deliver the inventory (in-band inspection) and the conductor must wait.
type Inspect interface {
	Validate(ctx context.Context, n *proto.Node) error
	Inspect(ctx context.Context, n *proto.Node) (res InspectResult, async bool, err error)
}

// Set is one node's set of implementations.
type Set struct {
	Power      Power
	Management Management
	Boot       Boot
	Inspect    Inspect
	// Deploy is the deploy interface: deploying is sequenced by the
	// conductor, its traits select the steps.
	Deploy DeployInterface
}

var (
	implMu     sync.RWMutex
	powers     = map[string]Power{}
	managers   = map[string]Management{}
	boots      = map[string]Boot{}
	inspectors = map[string]Inspect{}
)

func register[T any](m map[string]T, kind, name string, impl T) {
	implMu.Lock()
	defer implMu.Unlock()
	if _, dup := m[name]; dup {
		panic(fmt.Sprintf("driver: %s interface %q registered twice", kind, name))
	}
	m[name] = impl
}

// RegisterPower registers a power interface implementation under name.
func RegisterPower(name string, p Power) { register(powers, "power", name, p) }

// RegisterManagement registers a management interface implementation.
func RegisterManagement(name string, m Management) { register(managers, "management", name, m) }

// RegisterBoot registers a boot interface implementation.
func RegisterBoot(name string, b Boot) { register(boots, "boot", name, b) }

// RegisterInspect registers an inspect interface implementation.
func RegisterInspect(name string, i Inspect) { register(inspectors, "inspect", name, i) }

func find[T any](m map[string]T, kind, name, driverName string) (T, error) {
	ensureLoaded()
	implMu.RLock()
	defer implMu.RUnlock()
	impl, ok := m[name]
	if !ok {
		var zero T
		return zero, fmt.Errorf("%s interface %q is not available for hardware type %s", kind, name, driverName)
	}
	return impl, nil
}

// Resolve returns the implementations a node's fields select.
func Resolve(n *proto.Node) (Set, error) {
	hw, ok := Lookup(n.Driver)
	if !ok {
		return Set{}, fmt.Errorf("hardware type %q is not enabled", n.Driver)
	}
	var ifs Set
	var err error
	if ifs.Power, err = find(powers, "power", n.PowerInterface, n.Driver); err != nil {
		return ifs, err
	}
	if ifs.Management, err = find(managers, "management", n.ManagementInterface, n.Driver); err != nil {
		return ifs, err
	}
	if ifs.Boot, err = find(boots, "boot", n.BootInterface, n.Driver); err != nil {
		return ifs, err
	}
	if ifs.Inspect, err = find(inspectors, "inspect", n.InspectInterface, n.Driver); err != nil {
		return ifs, err
	}
	deploy := n.DeployInterface
	if deploy == "" {
		deploy = hw.Default("deploy") // what the API would have set
	}
	if ifs.Deploy, err = find(deploys, "deploy", deploy, n.Driver); err != nil {
		return ifs, err
	}
	return ifs, nil
}
