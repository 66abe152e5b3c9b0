package bmcsim

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// BootRecord is one power-on of a Memory system: which device it booted first
// and the virtual media present at that moment.
type BootRecord struct {
	At     time.Time
	Target string // effective override target (TargetNone = default order)
	Media  string // image inserted at power-on, "" if none
	Reset  ResetType
}

// Memory is an in-memory Backend: power state, boot override and virtual
// media are just fields, so thousands fit in one process. It records every
// power-on so tests can check which boot device a controller selected.
type Memory struct {
	inv Inventory

	mu        sync.Mutex
	behavior  MemoryBehavior
	changedAt time.Time // last power change, for TransitionDelay
	power     PowerState
	boot      BootOverride
	media     Media
	boots     []BootRecord
	nmis      int
	resets    []ResetType
}

var _ Backend = (*Memory)(nil)

// MemoryBehavior tunes how a Memory system reacts to power actions, so tests
// can reproduce slow or uncooperative machines.
type MemoryBehavior struct {
	// IgnoreGraceful makes the "OS" ignore the ACPI power button:
	// GracefulShutdown, GracefulRestart and PushPowerButton (when on) are
	// accepted but change nothing, as with a hung or minimal OS.
	IgnoreGraceful bool
	// TransitionDelay makes PowerState report PoweringOn/PoweringOff for this
	// long after each power change, as real BMCs do while the host sequences.
	TransitionDelay time.Duration
}

// SetBehavior changes the behaviour from now on.
func (m *Memory) SetBehavior(b MemoryBehavior) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.behavior = b
}

// NewMemory returns a powered-off Memory backend with the given inventory.
// Missing inventory facts get defaults derived from index (unique MAC,
// serial and UUID), so NewMemory(i, Inventory{}) is enough for most tests.
func NewMemory(index int, inv Inventory) *Memory {
	return &Memory{
		inv:   DefaultInventory(index, inv),
		power: PowerOff,
		boot:  BootOverride{Enabled: OverrideDisabled, Target: TargetNone, Mode: ModeUEFI},
	}
}

// DefaultInventory fills the zero fields of inv with plausible values that are
// unique per index.
func DefaultInventory(index int, inv Inventory) Inventory {
	if inv.Manufacturer == "" {
		inv.Manufacturer = "Kiln Simulated"
	}
	if inv.Model == "" {
		inv.Model = "SIM-1000"
	}
	if inv.SerialNumber == "" {
		inv.SerialNumber = fmt.Sprintf("SIM%07d", index)
	}
	if inv.UUID == "" {
		inv.UUID = fmt.Sprintf("5e1f0000-0000-4000-8000-%012x", index)
	}
	if inv.BIOSVersion == "" {
		inv.BIOSVersion = "1.0.0"
	}
	if inv.CPUCount == 0 {
		inv.CPUCount = 2
	}
	if inv.CPUModel == "" {
		inv.CPUModel = "Simulated x86-64 CPU"
	}
	if inv.CPUArch == "" {
		inv.CPUArch = "x86"
	}
	if inv.MemoryGiB == 0 {
		inv.MemoryGiB = 4
	}
	if len(inv.NICs) == 0 {
		inv.NICs = []NIC{{MAC: MACForIndex(index)}}
	}
	if len(inv.Disks) == 0 {
		inv.Disks = []Disk{{Name: "disk0", SizeBytes: 10 << 30}}
	}
	return inv
}

// MACForIndex returns a locally administered MAC unique for index (< 2^24),
// in QEMU's 52:54:00 prefix so the same value works for QEMU VMs.
func MACForIndex(index int) string {
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", (index>>16)&0xff, (index>>8)&0xff, index&0xff)
}

// Inventory implements Backend.
func (m *Memory) Inventory() Inventory { return m.inv }

// PowerState implements Backend.
func (m *Memory) PowerState(context.Context) (PowerState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.behavior.TransitionDelay; d > 0 && time.Since(m.changedAt) < d {
		if m.power == PowerOn {
			return PowerPoweringOn, nil
		}
		return PowerPoweringOff, nil
	}
	return m.power, nil
}

func (m *Memory) powerOffLocked() {
	if m.power != PowerOff {
		m.power, m.changedAt = PowerOff, time.Now()
	}
}

// Reset implements Backend. Graceful actions complete at once unless the
// behaviour says the guest ignores them.
func (m *Memory) Reset(_ context.Context, t ResetType) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resets = append(m.resets, t)
	switch t {
	case ResetOn, ResetForceOn:
		if m.power == PowerOff {
			m.bootLocked(t)
		}
	case ResetForceOff:
		m.powerOffLocked()
	case ResetGracefulShutdown:
		if !m.behavior.IgnoreGraceful {
			m.powerOffLocked()
		}
	case ResetPushPowerButton:
		if m.power == PowerOff {
			m.bootLocked(t)
		} else if !m.behavior.IgnoreGraceful {
			m.powerOffLocked()
		}
	case ResetGracefulRestart:
		if m.power == PowerOff {
			return ErrPoweredOff
		}
		if !m.behavior.IgnoreGraceful {
			m.bootLocked(t)
		}
	case ResetForceRestart, ResetPowerCycle:
		m.bootLocked(t)
	case ResetNmi:
		if m.power == PowerOff {
			return ErrPoweredOff
		}
		m.nmis++
	default:
		return fmt.Errorf("reset type %q not implemented", t)
	}
	return nil
}

func (m *Memory) bootLocked(t ResetType) {
	m.power, m.changedAt = PowerOn, time.Now()
	rec := BootRecord{At: time.Now(), Target: m.boot.EffectiveTarget(), Reset: t}
	if m.media.Inserted {
		rec.Media = m.media.Image
	}
	m.boots = append(m.boots, rec)
	m.boot = m.boot.consumeOnce()
}

// GuestReboot simulates the OS rebooting the machine: if it is on, it boots
// again with the current override (a Once override is used up).
func (m *Memory) GuestReboot() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.power == PowerOn {
		m.bootLocked("")
	}
}

// GuestPowerOff simulates the OS powering the machine off.
func (m *Memory) GuestPowerOff() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.powerOffLocked()
}

// Boots returns a copy of the power-on history.
func (m *Memory) Boots() []BootRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]BootRecord(nil), m.boots...)
}

// Resets returns a copy of every reset type received, in order.
func (m *Memory) Resets() []ResetType {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ResetType(nil), m.resets...)
}

// NMIs returns how many NMIs were injected.
func (m *Memory) NMIs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nmis
}

// BootOverride implements Backend.
func (m *Memory) BootOverride(context.Context) (BootOverride, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boot, nil
}

// SetBootOverride implements Backend.
func (m *Memory) SetBootOverride(_ context.Context, b BootOverride) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.boot = b
	return nil
}

// Media implements Backend.
func (m *Memory) Media(context.Context) (Media, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.media, nil
}

// InsertMedia implements Backend.
func (m *Memory) InsertMedia(_ context.Context, image string, writeProtected bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.media.Inserted {
		return ErrMediaInserted
	}
	m.media = Media{Image: image, Inserted: true, WriteProtected: writeProtected}
	return nil
}

// EjectMedia implements Backend.
func (m *Memory) EjectMedia(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.media.Inserted {
		return ErrMediaNotInserted
	}
	m.media = Media{}
	return nil
}

// PowerOns returns how many times the system was powered on or restarted.
func (m *Memory) PowerOns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.boots)
}
