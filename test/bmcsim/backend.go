// Package bmcsim is a Redfish BMC simulator for tests and demos.
//
// It exists so that Kiln's Redfish driver and the end-to-end tests run against a
// faithful Redfish service (status codes, error bodies, @odata annotations,
// allowable values, vendor quirks) without real hardware. One HTTP handler
// (Service) serves one or many systems; each system is driven by a Backend:
// Memory (thousands per process, for scale and fault tests) or QEMU (a real VM
// per system, for end-to-end tests). A Lab starts N services, one per
// 127.0.0.1 port, like a rack of BMCs.
//
// Typical use in a test:
//
//	lab, _ := bmcsim.StartLab(bmcsim.LabConfig{N: 100, Personality: "idrac"})
//	defer lab.Close()
//	b := lab.BMCs[7]
//	user, pass := b.Credentials()           // endpoint: b.URL
//	_ = b.SetFaults(bmcsim.Faults{ErrorRate: 0.2, Latency: 50 * time.Millisecond})
//	b.ExpireSessions()                      // next X-Auth-Token use gets 401
//	n := b.Requests()                       // requests this BMC served
//	boots := lab.Memory(7).Boots()          // which device each power-on booted
//
// Personalities (generic, idrac, ilo, supermicro) reproduce documented
// vendor behaviour; see personality.go for each quirk and its public source.
//
// Each system also serves hardware configuration: Bios (attributes, an
// attribute registry under /redfish/v1/Registries, a settings object applied
// at the next power-on, ResetBios), Storage (RAID controller, drives, volumes
// created and deleted through tasks), SecureBoot, Memory, a writable
// IndicatorLED; the service has TaskService, UpdateService (SimpleUpdate,
// FirmwareInventory whose versions change after the next boot) and
// #Manager.Reset. Tasks move on Config.Clock, so tests use a ManualClock.
// The vendor quirks here:
//
//   - idrac: a BIOS settings PATCH becomes a BIOSConfiguration job
//     (JID_<12 digits>) under Managers/iDRAC.Embedded.1/Jobs, answered 202
//     with the job in Location; @Redfish.SettingsApplyTime accepts Immediate
//     (the host reboots now), OnReset and the maintenance-window values; all
//     tasks are listed as Dell jobs (JobState Scheduled/Running/Completed/
//     Failed); storage is RAID.Integrated.1-1.
//   - ilo: the BIOS settings object holds the whole pending attribute set,
//     and a PATCH answers 200 with iLO.2.15.SystemResetRequired in iLO's
//     envelope; storage is DE00A000.
//   - supermicro: a BIOS settings PATCH needs If-Match with the settings
//     object's ETag (428 without, 412 stale); storage is HA-RAID.
//
// Faults.TaskError, TaskHang and UnstickySettings break tasks and BIOS
// settings on purpose (admin API: PUT /faults).
// The service enforces If-Match on PATCH against the ETag it sends, as a
// conformant service may: re-read a resource before patching it.
package bmcsim

import (
	"context"
	"errors"
)

// ResetType is a Redfish ComputerSystem.Reset ResetType value.
type ResetType string

// Reset types the backends implement.
const (
	ResetOn               ResetType = "On"
	ResetForceOn          ResetType = "ForceOn"
	ResetForceOff         ResetType = "ForceOff"
	ResetGracefulShutdown ResetType = "GracefulShutdown"
	ResetGracefulRestart  ResetType = "GracefulRestart"
	ResetForceRestart     ResetType = "ForceRestart"
	ResetPowerCycle       ResetType = "PowerCycle"
	ResetPushPowerButton  ResetType = "PushPowerButton"
	ResetNmi              ResetType = "Nmi"
)

// AllResetTypes lists every reset type a Backend must accept.
var AllResetTypes = []ResetType{ResetOn, ResetForceOff, ResetGracefulShutdown, ResetGracefulRestart,
	ResetForceRestart, ResetNmi, ResetForceOn, ResetPushPowerButton, ResetPowerCycle}

// PowerState is the Redfish PowerState of a system.
type PowerState string

// Power states reported by backends.
const (
	PowerOn          PowerState = "On"
	PowerOff         PowerState = "Off"
	PowerPoweringOn  PowerState = "PoweringOn"
	PowerPoweringOff PowerState = "PoweringOff"
)

// Boot override values (Redfish Boot.BootSourceOverride*).
const (
	OverrideDisabled   = "Disabled"
	OverrideOnce       = "Once"
	OverrideContinuous = "Continuous"

	TargetNone      = "None"
	TargetPxe       = "Pxe"
	TargetHdd       = "Hdd"
	TargetCd        = "Cd"
	TargetUsb       = "Usb"
	TargetBiosSetup = "BiosSetup"
	TargetUefiHTTP  = "UefiHttp"

	ModeLegacy = "Legacy"
	ModeUEFI   = "UEFI"
)

// BootOverride is the boot source override of a system.
type BootOverride struct {
	Enabled string // Disabled, Once or Continuous
	Target  string // None, Pxe, Hdd, Cd, ...
	Mode    string // Legacy or UEFI
}

// EffectiveTarget is the device the next power-on boots first: the override
// target when the override is enabled, else TargetNone (the default order).
func (b BootOverride) EffectiveTarget() string {
	if b.Enabled == OverrideOnce || b.Enabled == OverrideContinuous {
		return b.Target
	}
	return TargetNone
}

// consumeOnce returns the override after a power-on used it: a Once override
// is disabled, anything else is unchanged.
func (b BootOverride) consumeOnce() BootOverride {
	if b.Enabled == OverrideOnce {
		b.Enabled = OverrideDisabled
	}
	return b
}

// Media is the state of a system's virtual CD/DVD drive.
type Media struct {
	Image          string
	Inserted       bool
	WriteProtected bool
}

// NIC is a network interface of a simulated system.
type NIC struct {
	MAC string
}

// Disk is a disk of a simulated system.
type Disk struct {
	Name      string
	SizeBytes int64
}

// Inventory holds the hardware facts a system reports over Redfish.
type Inventory struct {
	Manufacturer string
	Model        string
	SerialNumber string
	UUID         string
	BIOSVersion  string
	CPUCount     int
	CPUModel     string
	CPUArch      string // Redfish ProcessorArchitecture: x86, ARM, ...
	MemoryGiB    int
	NICs         []NIC
	Disks        []Disk
}

// Errors a backend returns for requests that conflict with its state; the
// HTTP layer maps them to Redfish error responses.
var (
	ErrMediaInserted    = errors.New("virtual media already inserted")
	ErrMediaNotInserted = errors.New("no virtual media inserted")
	ErrPoweredOff       = errors.New("system is powered off")
)

// Backend is one simulated machine behind a BMC. Implementations must be safe
// for concurrent use. Values (reset types, targets) are already validated by
// the HTTP layer against the personality's allowable values.
type Backend interface {
	Inventory() Inventory
	PowerState(ctx context.Context) (PowerState, error)
	Reset(ctx context.Context, t ResetType) error
	BootOverride(ctx context.Context) (BootOverride, error)
	SetBootOverride(ctx context.Context, b BootOverride) error
	Media(ctx context.Context) (Media, error)
	InsertMedia(ctx context.Context, image string, writeProtected bool) error
	EjectMedia(ctx context.Context) error
}
