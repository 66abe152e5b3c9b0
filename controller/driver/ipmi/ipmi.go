// Package ipmi is Kiln's "ipmi" hardware type: power and boot device over
// IPMI 2.0 lanplus (RMCP+), with github.com/bougou/go-ipmi as the client.
// Interfaces are registered under Ironic's names: power and management
// "ipmitool", so enrollments written for Ironic work unchanged.
//
// Each operation opens an RMCP+ session and closes it: BMCs hold few
// sessions and expire idle ones quickly, so caching buys little. A per-BMC
// semaphore keeps one session at a time per BMC from this controller.
package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goipmi "github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/kilnhq/kiln/controller/driver"
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot" // the "ipxe" boot interface offered here
	"github.com/kilnhq/kiln/proto"
)

// HardwareType is the name nodes give in "driver"; Interface names the
// power and management implementations.
const (
	HardwareType = "ipmi"
	Interface    = "ipmitool"
)

// Info is a node's driver_info for IPMI, under Ironic's keys.
type Info struct {
	Address  string // ipmi_address
	Port     int    // ipmi_port, default 623
	Username string // ipmi_username
	Password string // ipmi_password
	Priv     types.PrivilegeLevel
}

var privLevels = map[string]types.PrivilegeLevel{
	"CALLBACK": types.PrivilegeLevelCallback, "USER": types.PrivilegeLevelUser,
	"OPERATOR": types.PrivilegeLevelOperator, "ADMINISTRATOR": types.PrivilegeLevelAdministrator,
	"OEM": types.PrivilegeLevelOEM,
}

// ParseInfo reads and checks a node's IPMI driver_info.
func ParseInfo(n *proto.Node) (Info, error) {
	str := func(k string) string {
		switch v := n.DriverInfo[k].(type) {
		case nil:
			return ""
		case string:
			return strings.TrimSpace(v)
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return fmt.Sprint(v)
		}
	}
	in := Info{Address: str("ipmi_address"), Username: str("ipmi_username"), Password: str("ipmi_password"), Port: 623, Priv: types.PrivilegeLevelAdministrator}
	if in.Address == "" {
		return in, errors.New("driver_info is missing ipmi_address")
	}
	if p := str("ipmi_port"); p != "" {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 || v > 65535 {
			return in, fmt.Errorf("driver_info ipmi_port %q is not a port number", p)
		}
		in.Port = v
	}
	if p := str("ipmi_priv_level"); p != "" {
		l, ok := privLevels[strings.ToUpper(p)]
		if !ok {
			return in, fmt.Errorf("driver_info ipmi_priv_level %q is not one of CALLBACK, USER, OPERATOR, ADMINISTRATOR, OEM", p)
		}
		in.Priv = l
	}
	if len(in.Username) > 16 {
		return in, fmt.Errorf("driver_info ipmi_username %q is longer than IPMI's 16 characters", in.Username)
	}
	if len(in.Password) > 20 {
		return in, errors.New("driver_info ipmi_password is longer than IPMI 2.0's 20 characters")
	}
	return in, nil
}

func (in Info) bmc() string { return net.JoinHostPort(in.Address, strconv.Itoa(in.Port)) }

// Driver holds the per-BMC locks and timeouts; the interfaces New builds
// share one.
type Driver struct {
	// Timeout bounds one IPMI exchange (go-ipmi retries within it).
	Timeout time.Duration
	Retries int

	mu    sync.Mutex
	locks map[string]chan struct{}
}

func (d *Driver) lock(ctx context.Context, bmc string) (func(), error) {
	d.mu.Lock()
	if d.locks == nil {
		d.locks = map[string]chan struct{}{}
	}
	ch, ok := d.locks[bmc]
	if !ok {
		ch = make(chan struct{}, 1)
		d.locks[bmc] = ch
	}
	d.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// with opens a lanplus session to the node's BMC, runs f and closes it.
func (d *Driver) with(ctx context.Context, n *proto.Node, what string, f func(c *goipmi.Client) error) (err error) {
	in, err := ParseInfo(n)
	if err != nil {
		return err
	}
	// One exchange with the BMC, counted in the caller's BMC metrics.
	defer func() { driver.ObserveBMC(ctx, HardwareType, what, err) }()
	unlock, err := d.lock(ctx, in.bmc())
	if err != nil {
		return fmt.Errorf("IPMI BMC %s: %s: %w", in.bmc(), what, err)
	}
	defer unlock()
	c, err := goipmi.NewClient(in.Address, in.Port, in.Username, in.Password)
	if err != nil {
		return fmt.Errorf("IPMI BMC %s: %w", in.bmc(), err)
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	retries := d.Retries
	if retries <= 0 {
		retries = 2
	}
	c = c.WithTimeout(timeout).WithRetry(retries).WithMaxPrivilegeLevel(in.Priv)
	if err := c.Connect(ctx); err != nil {
		return fmt.Errorf("IPMI BMC %s: open lanplus session as %q (check ipmi_address, ipmi_port, ipmi_username, ipmi_password, ipmi_priv_level): %w", in.bmc(), in.Username, err)
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	if err := f(c); err != nil {
		return fmt.Errorf("IPMI BMC %s: %s: %w", in.bmc(), what, err)
	}
	return nil
}

// Power is the "ipmitool" power interface.
type Power struct{ D *Driver }

// Validate checks driver_info and that the BMC accepts the credentials.
func (p *Power) Validate(ctx context.Context, n *proto.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return p.D.with(ctx, n, "get chassis status", func(c *goipmi.Client) error {
		_, err := c.GetChassisStatus(ctx)
		return err
	})
}

// GetPowerState reads the chassis power state.
func (p *Power) GetPowerState(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
	var on bool
	err := p.D.with(ctx, n, "get chassis status", func(c *goipmi.Client) error {
		st, err := c.GetChassisStatus(ctx)
		if err == nil {
			on = st.PowerIsOn
		}
		return err
	})
	if err != nil {
		return "", err
	}
	if on {
		return proto.PowerOn, nil
	}
	return proto.PowerOff, nil
}

// SetPowerState sends the chassis control for target and polls the chassis
// status (with backoff) until it matches, within timeout.
func (p *Power) SetPowerState(ctx context.Context, n *proto.Node, target proto.PowerState, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.D.with(ctx, n, fmt.Sprintf("set power %q", target), func(c *goipmi.Client) error {
		st, err := c.GetChassisStatus(ctx)
		if err != nil {
			return fmt.Errorf("get chassis status: %w", err)
		}
		on := st.PowerIsOn
		control := func(cc chassis.ChassisControl) error {
			if _, err := c.ChassisControl(ctx, cc); err != nil {
				return fmt.Errorf("chassis control %d: %w", cc, err)
			}
			return nil
		}
		switch target {
		case proto.PowerOn:
			if on {
				return nil
			}
			if err := control(chassis.ChassisControlPowerUp); err != nil {
				return err
			}
			return waitPower(ctx, c, true)
		case proto.PowerOff:
			if !on {
				return nil
			}
			if err := control(chassis.ChassisControlPowerDown); err != nil {
				return err
			}
			return waitPower(ctx, c, false)
		case proto.PowerSoftOff:
			if !on {
				return nil
			}
			if err := control(chassis.ChassisControlSoftShutdown); err != nil {
				return err
			}
			return waitPower(ctx, c, false)
		case proto.PowerRebooting:
			if !on {
				if err := control(chassis.ChassisControlPowerUp); err != nil {
					return err
				}
			} else if err := control(chassis.ChassisControlHardReset); err != nil { // ipmitool power reset
				return err
			}
			return waitPower(ctx, c, true)
		case proto.PowerSoftReboot:
			if on {
				if err := control(chassis.ChassisControlSoftShutdown); err != nil {
					return err
				}
				if err := waitPower(ctx, c, false); err != nil {
					return err
				}
			}
			if err := control(chassis.ChassisControlPowerUp); err != nil {
				return err
			}
			return waitPower(ctx, c, true)
		}
		return fmt.Errorf("unsupported power target %q", target)
	})
}

func waitPower(ctx context.Context, c *goipmi.Client, on bool) error {
	delay := 100 * time.Millisecond
	for {
		st, err := c.GetChassisStatus(ctx)
		if err == nil && st.PowerIsOn == on {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("chassis power on=%v not reached: %w", on, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 3*time.Second)
	}
}

// Management is the "ipmitool" management interface: boot device flags.
type Management struct{ D *Driver }

var selectors = map[string]types.BootDeviceSelector{
	"pxe":   types.BootDeviceSelectorForcePXE,
	"disk":  types.BootDeviceSelectorForceHardDrive,
	"safe":  types.BootDeviceSelectorForceHardDriveSafe,
	"cdrom": types.BootDeviceSelectorForceCDROM,
	"bios":  types.BootDeviceSelectorForceBIOSSetup,
}

// Validate checks driver_info and the credentials.
func (m *Management) Validate(ctx context.Context, n *proto.Node) error {
	return (&Power{D: m.D}).Validate(ctx, n)
}

// SetBootDevice sets the boot flags: device, once or persistent, with the
// EFI flag when the node's capabilities say boot_mode:uefi; then reads them
// back.
func (m *Management) SetBootDevice(ctx context.Context, n *proto.Node, device string, persistent bool) error {
	sel, ok := selectors[device]
	if !ok {
		return fmt.Errorf("boot device %q is not one of pxe, disk, safe, cdrom, bios", device)
	}
	efi := types.BIOSBootTypeLegacy
	if uefi(n) {
		efi = types.BIOSBootTypeEFI
	}
	return m.D.with(ctx, n, fmt.Sprintf("set boot device %s (persistent=%v)", device, persistent), func(c *goipmi.Client) error {
		if err := c.SetBootDevice(ctx, sel, efi, persistent); err != nil {
			return err
		}
		got := &types.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, got); err != nil {
			return fmt.Errorf("read boot flags back: %w", err)
		}
		if !got.BootFlagsValid || got.BootDeviceSelector != sel || got.Persist != persistent || got.BIOSBootType != efi {
			return fmt.Errorf("BMC accepted the boot flags but reports valid=%v device=%v persistent=%v efi=%v", got.BootFlagsValid, got.BootDeviceSelector, got.Persist, got.BIOSBootType)
		}
		return nil
	})
}

// BootFlags reads the current boot flags (device "" = no override).
func (m *Management) BootFlags(ctx context.Context, n *proto.Node) (device string, persistent, efi bool, err error) {
	err = m.D.with(ctx, n, "get boot flags", func(c *goipmi.Client) error {
		got := &types.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, got); err != nil {
			return err
		}
		persistent, efi = got.Persist, bool(got.BIOSBootType)
		if got.BootFlagsValid {
			for d, s := range selectors {
				if s == got.BootDeviceSelector {
					device = d
				}
			}
		}
		return nil
	})
	return device, persistent, efi, err
}

func uefi(n *proto.Node) bool {
	switch c := n.Properties["capabilities"].(type) {
	case string:
		for _, kv := range strings.Split(c, ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(kv), ":"); ok && k == "boot_mode" {
				return strings.EqualFold(v, "uefi")
			}
		}
	case map[string]any:
		v, _ := c["boot_mode"].(string)
		return strings.EqualFold(v, "uefi")
	}
	return false
}

func init() {
	driver.RegisterModule(driver.Module{Type: hardwareType, New: New})
}

// New builds the ipmi interfaces around one Driver (its per-BMC locks).
func New(driver.Env) (driver.Implementations, error) {
	d := &Driver{}
	return driver.Implementations{
		Power:      map[string]driver.Power{Interface: &Power{D: d}},
		Management: map[string]driver.Management{Interface: &Management{D: d}},
	}, nil
}

var hardwareType = driver.HardwareType{
	Name: HardwareType,
	Supported: map[string][]string{
		"power":      {Interface},
		"management": {Interface},
		"boot":       {"ipxe", "fake"},
		"inspect":    {"agent", "no-inspect"},
		"deploy":     {"direct", "custom-agent", "ramdisk"},
		"network":    {"noop", "flat"},
		"storage":    {"noop"},
		"bios":       {"no-bios"},
		"console":    {"no-console"},
		"firmware":   {"no-firmware"},
		"raid":       {"no-raid"},
		"rescue":     {"no-rescue"},
		"vendor":     {"no-vendor"},
	},
	BootDevices: []string{"pxe", "disk", "safe", "cdrom", "bios"},
}

// CheckConfig implements driver.ConfigChecker: driver_info parses.
func (p *Power) CheckConfig(n *proto.Node) error {
	_, err := ParseInfo(n)
	return err
}

// CheckConfig implements driver.ConfigChecker: driver_info parses.
func (m *Management) CheckConfig(n *proto.Node) error {
	_, err := ParseInfo(n)
	return err
}

// ReadBootDevice implements driver.BootDeviceReader from the boot flags.
func (m *Management) ReadBootDevice(ctx context.Context, n *proto.Node) (driver.BootDeviceState, error) {
	dev, persistent, _, err := m.BootFlags(ctx, n)
	if err != nil {
		return driver.BootDeviceState{}, err
	}
	return driver.BootDeviceState{Device: dev, Persistent: persistent}, nil
}
