package driver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kilnhq/kiln/proto"
)

// A hardware type that needs configuration (a BMC connection pool, the
// controller's ISO builder, a logger) registers a Module at init: its
// declaration and a constructor. The controller calls Load once with its
// Env, and every module builds its interfaces from it — in the manner of
// Caddy's module registry — so no driver is a global configured after the
// fact, and the controller names none of them.

// Env is what a hardware type is built with.
type Env struct {
	Log *slog.Logger
	// Media builds the ISOs virtual-media boot inserts; nil: only a node's
	// driver_info deploy_iso can be booted.
	Media ISOBuilder
	// OnShutdown registers clean-up to run when the controller stops
	// (logging out of BMC sessions); nil: none is run.
	OnShutdown func(func(context.Context) error)
}

// Implementations are a hardware type's implementations, by the name a node gives
// in "<iface>_interface". A kind a type leaves nil it does not implement
// itself; an optional interface kind is a new field, which types that lack
// it never mention.
type Implementations struct {
	Power      map[string]Power
	Management map[string]Management
	Boot       map[string]Boot
	Inspect    map[string]Inspect
	// The hardware-configuration interfaces (hwconfig.go, raid.go,
	// firmware.go); a type without them leaves them nil.
	BIOS     map[string]BIOS
	RAID     map[string]RAID
	Firmware map[string]Firmware
}

// Module is a hardware type with the constructor of its interfaces.
type Module struct {
	Type HardwareType
	New  func(Env) (Implementations, error)
}

// ISOParams is what an ISO for the agent is built from.
type ISOParams struct {
	Kernel, Ramdisk string            // driver_info deploy_kernel / deploy_ramdisk
	KernelArgs      map[string]string // ipa-api-url, ipa-agent-token, …
}

// ISOBuilder makes the bootable ISO a BMC inserts as virtual media and
// returns the URL the BMC downloads it from. Building ISOs belongs to the
// controller (it knows its boot files and URL); drivers only insert them.
type ISOBuilder interface {
	BuildISO(ctx context.Context, n *proto.Node, p ISOParams) (url string, err error)
	// CleanISO removes what BuildISO made for n (nothing to do is no error).
	CleanISO(ctx context.Context, n *proto.Node) error
}

// ISOValidator is implemented by ISO builders that can tell, without
// building, whether an ISO for n could be built.
type ISOValidator interface {
	ValidateISO(n *proto.Node) error
}

var (
	modMu   sync.Mutex
	modules []Module
	// loaded is set once a Load succeeded (read without modMu on every
	// Resolve).
	loaded atomic.Bool
	// installed names the implementations Load put in place ("kind name"),
	// which a later Load may replace.
	installed = map[string]bool{}
)

// RegisterModule declares m's hardware type now; its interfaces are built
// by Load.
func RegisterModule(m Module) {
	Register(m.Type)
	modMu.Lock()
	defer modMu.Unlock()
	modules = append(modules, m)
}

// Load builds every registered module's interfaces with env and puts them in
// place of those an earlier Load built.
func Load(env Env) error {
	modMu.Lock()
	defer modMu.Unlock()
	return load(env)
}

func load(env Env) error {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	built := make([]Implementations, len(modules))
	for i, m := range modules {
		ifs, err := m.New(env)
		if err != nil {
			return fmt.Errorf("hardware type %s: %w", m.Type.Name, err)
		}
		built[i] = ifs
	}
	implMu.Lock()
	defer implMu.Unlock()
	for _, ifs := range built {
		for _, err := range []error{
			install(powers, "power", ifs.Power),
			install(managers, "management", ifs.Management),
			install(boots, "boot", ifs.Boot),
			install(inspectors, "inspect", ifs.Inspect),
			install(bioses, "bios", ifs.BIOS),
			install(raids, "raid", ifs.RAID),
			install(firmwares, "firmware", ifs.Firmware),
		} {
			if err != nil {
				return err
			}
		}
	}
	loaded.Store(true)
	return nil
}

// install puts impls in m, refusing a name registered outside Load.
func install[T any](m map[string]T, kind string, impls map[string]T) error {
	for name, impl := range impls {
		if _, taken := m[name]; taken && !installed[kind+" "+name] {
			return fmt.Errorf("driver: %s interface %q is registered twice", kind, name)
		}
		m[name] = impl
		installed[kind+" "+name] = true
	}
	return nil
}

// ensureLoaded loads the modules with the default Env if nothing has
// (tests and tools that resolve drivers without a controller).
func ensureLoaded() {
	if loaded.Load() {
		return
	}
	modMu.Lock()
	defer modMu.Unlock()
	if !loaded.Load() {
		if err := load(Env{}); err != nil {
			panic(err)
		}
	}
}
