// Package driver describes Kiln's hardware types: which interface
// implementations each one offers and which it picks by default. A node names
// its hardware type in "driver" and may override each "*_interface" field; the
// API validates those choices here, and the conductor (a later layer) resolves
// them to implementations.
//
// Hardware types register themselves in init(), so adding a vendor type is a new
// package plus one blank import, never an edit to a switch.
package driver

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Interfaces lists every node interface field, by the name that precedes
// "_interface" in the node document.
var Interfaces = []string{
	"bios", "boot", "console", "deploy", "firmware", "inspect", "management",
	"network", "power", "raid", "rescue", "storage", "vendor",
}

// HardwareType declares the interface implementations a driver supports.
// Supported[iface] lists the allowed implementation names, first one default
// unless Defaults says otherwise.
type HardwareType struct {
	Name      string
	Supported map[string][]string
	Defaults  map[string]string
	// BootDevices lists what PUT .../management/boot_device accepts.
	BootDevices []string
}

// Default returns the implementation chosen for iface when the node names none.
func (h HardwareType) Default(iface string) string {
	if d, ok := h.Defaults[iface]; ok {
		return d
	}
	if s := h.Supported[iface]; len(s) > 0 {
		return s[0]
	}
	return "no-" + iface
}

// Check reports whether impl is allowed for iface, with an error that lists the
// allowed choices.
func (h HardwareType) Check(iface, impl string) error {
	allowed := h.Supported[iface]
	if slices.Contains(allowed, impl) {
		return nil
	}
	return fmt.Errorf("could not find a suitable %s interface %q for hardware type %s; enabled: %v", iface, impl, h.Name, allowed)
}

var (
	mu    sync.RWMutex
	types = map[string]HardwareType{}
)

// Register makes a hardware type available; a duplicate name panics at start.
func Register(h HardwareType) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := types[h.Name]; dup {
		panic("driver: hardware type registered twice: " + h.Name)
	}
	types[h.Name] = withAgentRAID(h)
}

// Lookup returns the hardware type called name.
func Lookup(name string) (HardwareType, bool) {
	mu.RLock()
	defer mu.RUnlock()
	h, ok := types[name]
	return h, ok
}

// Names returns the registered hardware type names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
