package ipmi_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/clock"
	"github.com/bougou/go-ipmi/pkg/hal"
	"github.com/bougou/go-ipmi/pkg/hal/mock"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/transport/udp"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/ipmi"
	"github.com/kilnhq/kiln/proto"
)

// acpiChassis is go-ipmi's mock chassis with an OS that obeys the ACPI soft
// shutdown (the mock only counts it as a warm reset).
// It counts the actions atomically (the mock's own counters are unlocked).
type acpiChassis struct {
	*mock.Chassis
	cycles, soft *atomic.Int32 // hard resets, ACPI soft shutdowns
}

func (c acpiChassis) WarmReset(ctx context.Context) error {
	c.soft.Add(1)
	_ = c.Chassis.WarmReset(ctx)
	return c.Chassis.SetPower(ctx, false)
}

func (c acpiChassis) ColdReset(ctx context.Context) error {
	c.cycles.Add(1)
	return c.Chassis.ColdReset(ctx)
}

type acpiHAL struct {
	*mock.HAL
	ch acpiChassis
}

func (h acpiHAL) Chassis() hal.ChassisHAL { return h.ch }

type simBMC struct {
	addr  string
	port  int
	chass acpiChassis
}

// startBMC runs go-ipmi's reference BMC server on a 127.0.0.1 UDP port.
func startBMC(t *testing.T, user, pass string) *simBMC {
	t.Helper()
	m := mock.New()
	ch := acpiChassis{Chassis: m.Chassis().(*mock.Chassis), cycles: new(atomic.Int32), soft: new(atomic.Int32)}
	b := bmc.New(bmc.DeviceInfo{DeviceID: 32, IPMIVersion: 0x20, ManufacturerID: 0x000157}, [16]byte{1, 2, 3}, acpiHAL{HAL: m, ch: ch}, bmc.WithClock(clock.Real))
	u, err := b.Users.Add(2, user)
	if err != nil {
		t.Fatal(err)
	}
	u.SetPassword([]byte(pass))
	u.Enabled = true
	u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: bmc.PrivilegeLevelAdministrator, Enabled: true}
	conn, err := udp.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(b, conn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); srv.Close(); conn.Close(); <-done })
	a := conn.LocalAddr().(*net.UDPAddr)
	return &simBMC{addr: "127.0.0.1", port: a.Port, chass: ch}
}

func (s *simBMC) node(extra proto.Dict) *proto.Node {
	di := proto.Dict{"ipmi_address": s.addr, "ipmi_port": strconv.Itoa(s.port), "ipmi_username": "kiln", "ipmi_password": "s3cret"}
	for k, v := range extra {
		di[k] = v
	}
	return &proto.Node{UUID: "n1", Driver: "ipmi", DriverInfo: di, Properties: proto.Dict{}}
}

func TestPowerAgainstGoIPMIServer(t *testing.T) {
	ctx := context.Background()
	sim := startBMC(t, "kiln", "s3cret")
	d := &ipmi.Driver{Timeout: time.Second}
	pw := &ipmi.Power{D: d}
	n := sim.node(nil)
	if err := pw.Validate(ctx, n); err != nil {
		t.Fatalf("validate: %v", err)
	}
	for _, s := range []struct {
		target, want proto.PowerState
	}{
		{proto.PowerOn, proto.PowerOn},
		{proto.PowerRebooting, proto.PowerOn},
		{proto.PowerSoftReboot, proto.PowerOn},
		{proto.PowerSoftOff, proto.PowerOff},
		{proto.PowerOn, proto.PowerOn},
		{proto.PowerOff, proto.PowerOff},
		{proto.PowerRebooting, proto.PowerOn},
	} {
		if err := pw.SetPowerState(ctx, n, s.target, 5*time.Second); err != nil {
			t.Fatalf("%s: %v", s.target, err)
		}
		got, err := pw.GetPowerState(ctx, n)
		if err != nil || got != s.want {
			t.Fatalf("after %s: %q %v", s.target, got, err)
		}
	}
	if c, s := sim.chass.cycles.Load(), sim.chass.soft.Load(); c != 1 || s != 2 {
		t.Errorf("hard resets %d (want 1), soft shutdowns %d (want 2)", c, s)
	}
}

func TestBootDeviceAgainstGoIPMIServer(t *testing.T) {
	ctx := context.Background()
	sim := startBMC(t, "kiln", "s3cret")
	mg := &ipmi.Management{D: &ipmi.Driver{Timeout: time.Second}}
	n := sim.node(proto.Dict{"ipmi_priv_level": "ADMINISTRATOR"})
	for _, c := range []struct {
		dev        string
		persistent bool
		uefi       bool
		sel        types.BootDeviceSelector
	}{
		{"pxe", false, true, types.BootDeviceSelectorForcePXE},
		{"disk", true, true, types.BootDeviceSelectorForceHardDrive},
		{"cdrom", false, false, types.BootDeviceSelectorForceCDROM},
		{"bios", true, false, types.BootDeviceSelectorForceBIOSSetup},
	} {
		n.Properties["capabilities"] = "boot_mode:bios"
		if c.uefi {
			n.Properties["capabilities"] = "boot_mode:uefi"
		}
		if err := mg.SetBootDevice(ctx, n, c.dev, c.persistent); err != nil {
			t.Fatalf("%s: %v", c.dev, err)
		}
		f, err := sim.chass.GetBootFlags(ctx)
		if err != nil || f == nil || !f.BootFlagsValid || f.BootDeviceSelector != c.sel || f.Persist != c.persistent || bool(f.BIOSBootType) != c.uefi {
			t.Fatalf("%s: BMC boot flags %+v", c.dev, f)
		}
		dev, pers, efi, err := mg.BootFlags(ctx, n)
		if err != nil || dev != c.dev || pers != c.persistent || efi != c.uefi {
			t.Fatalf("BootFlags = %s %v %v %v", dev, pers, efi, err)
		}
	}
	if err := mg.SetBootDevice(ctx, n, "floppy", false); err == nil {
		t.Fatal("unknown device accepted")
	}
}

func TestValidateBadDriverInfo(t *testing.T) {
	ctx := context.Background()
	sim := startBMC(t, "kiln", "s3cret")
	pw := &ipmi.Power{D: &ipmi.Driver{Timeout: 300 * time.Millisecond, Retries: 1}}
	dead, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	deadPort := strconv.Itoa(dead.LocalAddr().(*net.UDPAddr).Port)
	dead.Close()
	for _, c := range []struct {
		name string
		di   proto.Dict
		want string
	}{
		{"wrong password", proto.Dict{"ipmi_password": "nope"}, "open lanplus session"},
		{"unknown user", proto.Dict{"ipmi_username": "mallory"}, "open lanplus session"},
		{"unreachable", proto.Dict{"ipmi_port": deadPort}, "127.0.0.1:" + deadPort + ": open lanplus session"},
		{"missing address", proto.Dict{"ipmi_address": ""}, "missing ipmi_address"},
		{"bad port", proto.Dict{"ipmi_port": "x"}, "ipmi_port"},
		{"bad priv", proto.Dict{"ipmi_priv_level": "ROOT"}, "ipmi_priv_level"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := pw.Validate(ctx, sim.node(c.di))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if strings.HasPrefix(c.want, "open lanplus") && !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(sim.port)) {
				t.Errorf("error %q does not name the BMC", err)
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	n := &proto.Node{Driver: "ipmi", PowerInterface: "ipmitool", ManagementInterface: "ipmitool", BootInterface: "ipxe", InspectInterface: "agent", DeployInterface: "direct"}
	if _, err := driver.Resolve(n); err != nil {
		t.Fatal(err)
	}
}
