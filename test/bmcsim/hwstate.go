package bmcsim

import (
	"sync"
	"time"
)

// Clock gives a Service its notion of time for tasks, so tests move tasks on
// by advancing a ManualClock rather than by waiting.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// powerOnCounter is implemented by backends that count their power-ons
// (Memory, QEMU). Settings staged for "the next reset" are applied when the
// count moves, whoever caused the boot: a Redfish reset or the guest itself.
type powerOnCounter interface {
	PowerOns() int
}

// Indicator LED states (Redfish IndicatorLED).
const (
	LEDOff      = "Off"
	LEDLit      = "Lit"
	LEDBlinking = "Blinking"
)

// Secure boot modes (Redfish SecureBootMode).
const (
	SecureBootSetupMode    = "SetupMode"
	SecureBootUserMode     = "UserMode"
	SecureBootAuditMode    = "AuditMode"
	SecureBootDeployedMode = "DeployedMode"
)

// hwState is the hardware configuration of one system that a BMC keeps
// itself, independent of the backend: indicator LED, secure boot, BIOS,
// storage and firmware. Values "for the next boot" are applied in onBoot.
type hwState struct {
	mu        sync.Mutex
	seenBoots int

	led string

	sbEnable  bool   // SecureBootEnable: wanted for the next boot
	sbCurrent bool   // SecureBootCurrentBoot: what the last boot used
	sbMode    string // SecureBootMode

	bios         map[string]any // current BIOS attributes
	biosPending  map[string]any // settings object: applied at the next boot
	biosApplied  time.Time      // when pending settings were last applied
	biosMessages []Message      // result of that application
	biosVersion  string         // BIOS firmware version
	biosStaged   string         // version installed by an update, active after the next boot

	drives     []drive
	volumes    []*volume
	creating   []*volume // volumes whose create task runs: their drives are taken
	nextVolume int
}

func newHWState(be Backend) *hwState {
	inv := be.Inventory()
	return &hwState{led: LEDOff, sbMode: SecureBootUserMode,
		bios: biosDefaults(inv), biosPending: map[string]any{}, biosMessages: []Message{},
		biosVersion: inv.BIOSVersion, drives: storageDrives(inv)}
}

// syncBoots applies what waits for a reboot if the backend booted since the
// last look.
func (s *Service) syncBoots(sys *system) {
	c, ok := sys.backend.(powerOnCounter)
	if !ok {
		return
	}
	n := c.PowerOns()
	h := sys.hw
	h.mu.Lock()
	defer h.mu.Unlock()
	if n == h.seenBoots {
		return
	}
	h.seenBoots = n
	h.sbCurrent = h.sbEnable && h.sbMode != SecureBootSetupMode
	h.applyBiosLocked(s.clock.Now(), s.faults.Load().UnstickySettings)
	if h.biosStaged != "" {
		h.biosVersion, h.biosStaged = h.biosStaged, ""
	}
}

// syncAllBoots runs syncBoots for every system: for service-level resources
// (tasks, firmware, jobs) that depend on reboots.
func (s *Service) syncAllBoots() {
	for _, sys := range s.systems {
		s.syncBoots(sys)
	}
}
