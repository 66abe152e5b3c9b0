package redfish_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// fast limits keep fault tests short.
var fast = redfish.Limits{Backoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Retries: 4}

func startLab(t *testing.T, n int, personality string) *bmcsim.Lab {
	t.Helper()
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: n, Personality: personality})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	return lab
}

func nodeFor(b *bmcsim.BMC, extra proto.Dict) *proto.Node {
	u, p := b.Credentials()
	di := proto.Dict{"redfish_address": b.URL, "redfish_username": u, "redfish_password": p}
	for k, v := range extra {
		di[k] = v
	}
	return &proto.Node{UUID: "node-" + b.URL, Driver: "redfish", DriverInfo: di, Properties: proto.Dict{}}
}

func newPool(t *testing.T, l redfish.Limits) *redfish.Pool {
	p := redfish.NewPool(l, nil)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func mem(lab *bmcsim.Lab, i int) *bmcsim.Memory { return lab.Memory(i) }

func TestPowerEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			pool := newPool(t, fast)
			pw := &redfish.Power{Pool: pool}
			n := nodeFor(lab.BMCs[0], nil)
			if err := pw.Validate(ctx, n); err != nil {
				t.Fatalf("validate: %v", err)
			}
			steps := []struct {
				target proto.PowerState
				want   proto.PowerState
			}{
				{proto.PowerOn, proto.PowerOn},
				{proto.PowerRebooting, proto.PowerOn},
				{proto.PowerSoftReboot, proto.PowerOn},
				{proto.PowerSoftOff, proto.PowerOff},
				{proto.PowerRebooting, proto.PowerOn}, // reboot of an off machine powers it on
				{proto.PowerOff, proto.PowerOff},
			}
			for _, s := range steps {
				if err := pw.SetPowerState(ctx, n, s.target, 5*time.Second); err != nil {
					t.Fatalf("%s: %v", s.target, err)
				}
				got, err := pw.GetPowerState(ctx, n)
				if err != nil || got != s.want {
					t.Fatalf("after %s: power %q %v, want %q", s.target, got, err, s.want)
				}
			}
			resets := mem(lab, 0).Resets()
			if len(resets) != len(steps) {
				t.Errorf("resets %v: want one per step", resets)
			}
			allowed := lab.BMCs[0].Personality().ResetTypes
			for _, r := range resets {
				if !slices.Contains(allowed, r) {
					t.Errorf("sent reset %s outside the allowed %v", r, allowed)
				}
			}
			if lab.BMCs[0].Sessions() != 1 {
				t.Errorf("sessions open = %d, want the one cached session", lab.BMCs[0].Sessions())
			}
		})
	}
}

func TestPowerWaitsForTransitionAndTimesOut(t *testing.T) {
	ctx := context.Background()
	lab := startLab(t, 1, "generic")
	m := mem(lab, 0)
	m.SetBehavior(bmcsim.MemoryBehavior{TransitionDelay: 400 * time.Millisecond})
	pw := &redfish.Power{Pool: newPool(t, fast)}
	n := nodeFor(lab.BMCs[0], nil)
	start := time.Now()
	if err := pw.SetPowerState(ctx, n, proto.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("power on returned after %s, before the BMC reported On", d)
	}
	// Someone else powered it off a moment ago (PoweringOff): power off
	// waits for Off instead of returning at once.
	if err := m.Reset(ctx, bmcsim.ResetForceOff); err != nil {
		t.Fatal(err)
	}
	if err := pw.SetPowerState(ctx, n, proto.PowerOff, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if ps, _ := m.PowerState(ctx); ps != bmcsim.PowerOff {
		t.Fatalf("power off returned while the BMC reports %s", ps)
	}
	if err := pw.SetPowerState(ctx, n, proto.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// A guest that ignores ACPI: soft power off must fail within its timeout.
	m.SetBehavior(bmcsim.MemoryBehavior{IgnoreGraceful: true})
	err := pw.SetPowerState(ctx, n, proto.PowerSoftOff, 700*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not reached within") || !strings.Contains(err.Error(), lab.BMCs[0].URL) {
		t.Fatalf("soft off of a deaf guest: %v", err)
	}
}

func TestBootDeviceEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			mg := &redfish.Management{Pool: newPool(t, fast)}
			n := nodeFor(lab.BMCs[0], nil)
			devs, err := mg.SupportedBootDevices(ctx, n)
			if err != nil || !slices.Contains(devs, "pxe") || !slices.Contains(devs, "disk") {
				t.Fatalf("supported devices %v %v", devs, err)
			}
			m := mem(lab, 0)
			for _, c := range []struct {
				dev        string
				persistent bool
				target     string
			}{
				{"pxe", false, bmcsim.TargetPxe},
				{"cdrom", false, bmcsim.TargetCd}, // only the target changes: iDRAC needs Enabled too
				{"disk", true, bmcsim.TargetHdd},
				{"bios", false, bmcsim.TargetBiosSetup},
			} {
				if err := mg.SetBootDevice(ctx, n, c.dev, c.persistent); err != nil {
					t.Fatalf("set %s: %v", c.dev, err)
				}
				bo, _ := m.BootOverride(ctx)
				wantEnabled := bmcsim.OverrideOnce
				if c.persistent {
					wantEnabled = bmcsim.OverrideContinuous
				}
				if bo.Target != c.target || bo.Enabled != wantEnabled {
					t.Fatalf("after %s: %+v", c.dev, bo)
				}
				if bo.Mode != bmcsim.ModeUEFI {
					t.Fatalf("after %s the boot mode became %s (Supermicro reverts it unless repeated)", c.dev, bo.Mode)
				}
				got, err := mg.GetBootDevice(ctx, n)
				if err != nil || got.Device != c.dev || got.Persistent != c.persistent {
					t.Fatalf("GetBootDevice = %+v %v", got, err)
				}
			}
			// Boot mode from the node's capabilities.
			n.Properties["capabilities"] = "boot_mode:bios"
			err = mg.SetBootDevice(ctx, n, "pxe", false)
			bo, _ := m.BootOverride(ctx)
			if name == "ilo" {
				if err == nil || !strings.Contains(err.Error(), "ilo-boot-mode-read-only") {
					t.Fatalf("legacy mode on iLO: %v", err)
				}
				return
			}
			if err != nil || bo.Mode != bmcsim.ModeLegacy || bo.Target != bmcsim.TargetPxe {
				t.Fatalf("pxe in legacy mode: %+v %v", bo, err)
			}
			if err := mg.SetBootMode(ctx, n, redfish.ModeUEFI); err != nil {
				t.Fatal(err)
			}
			if bo, _ := m.BootOverride(ctx); bo.Mode != bmcsim.ModeUEFI {
				t.Fatalf("SetBootMode UEFI: %+v", bo)
			}
			if err := mg.SetBootDevice(ctx, n, "floppy", false); err == nil {
				t.Fatal("unknown device accepted")
			}
		})
	}
}

// isoFake stands in for the ISO builder and records what it was given.
type isoFake struct {
	mu      sync.Mutex
	params  []redfish.ISOParams
	cleaned int
}

func (f *isoFake) BuildISO(_ context.Context, n *proto.Node, p redfish.ISOParams) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.params = append(f.params, p)
	return "http://10.0.2.2:6385/boot/iso/" + n.UUID + ".iso", nil
}

func (f *isoFake) CleanISO(context.Context, *proto.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleaned++
	return nil
}

func TestVirtualMediaEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			pool := newPool(t, fast)
			iso := &isoFake{}
			mg := &redfish.Management{Pool: pool}
			vb := &redfish.VirtualMediaBoot{Pool: pool, ISO: iso, Mgmt: mg}
			pw := &redfish.Power{Pool: pool}
			n := nodeFor(lab.BMCs[0], proto.Dict{"deploy_kernel": "http://x/k", "deploy_ramdisk": "http://x/r"})
			if err := vb.Validate(ctx, n); err != nil {
				t.Fatalf("validate: %v", err)
			}
			m := mem(lab, 0)
			// Something left in the drive is ejected first.
			if err := m.InsertMedia(ctx, "http://old/stale.iso", true); err != nil {
				t.Fatal(err)
			}
			err := vb.PrepareRamdisk(ctx, n, driver.RamdiskParams{KernelArgs: map[string]string{"ipa-api-url": "http://10.0.2.2:6385"}, AgentToken: "tok-0123456789012345678901234567890123"})
			if err != nil {
				t.Fatalf("prepare ramdisk: %v", err)
			}
			if len(iso.params) != 1 || iso.params[0].KernelArgs["ipa-agent-token"] == "" || iso.params[0].Kernel != "http://x/k" {
				t.Fatalf("ISO params %+v", iso.params)
			}
			url := "http://10.0.2.2:6385/boot/iso/" + n.UUID + ".iso"
			md, _ := m.Media(ctx)
			if !md.Inserted || md.Image != url {
				t.Fatalf("media %+v", md)
			}
			if err := pw.SetPowerState(ctx, n, proto.PowerRebooting, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			m.GuestReboot() // the agent reboots into the disk: the Once override is used up
			boots := m.Boots()
			if len(boots) != 2 || boots[0].Target != bmcsim.TargetCd || boots[0].Media != url || boots[1].Target != bmcsim.TargetNone {
				t.Fatalf("boots %+v: want CD with the ISO once, then the default order", boots)
			}
			if err := vb.PrepareInstance(ctx, n); err != nil {
				t.Fatal(err)
			}
			md, _ = m.Media(ctx)
			bo, _ := m.BootOverride(ctx)
			if md.Inserted || bo.Target != bmcsim.TargetHdd || bo.Enabled != bmcsim.OverrideContinuous || iso.cleaned != 1 {
				t.Fatalf("after PrepareInstance media %+v boot %+v cleaned %d", md, bo, iso.cleaned)
			}
			if err := vb.CleanUpRamdisk(ctx, n); err != nil {
				t.Fatalf("clean-up with nothing inserted: %v", err)
			}
			// Without a builder, only a prebuilt deploy_iso can be used.
			pre := &redfish.VirtualMediaBoot{Pool: pool, ISO: redfish.PrebuiltISO{}, Mgmt: mg}
			if err := pre.Validate(ctx, n); err == nil || !strings.Contains(err.Error(), "deploy_iso") {
				t.Errorf("validate without ISO builder nor deploy_iso: %v", err)
			}
			n.DriverInfo["deploy_iso"] = "http://x/agent.iso"
			if err := pre.Validate(ctx, n); err != nil {
				t.Error(err)
			}
			if err := pre.PrepareRamdisk(ctx, n, driver.RamdiskParams{}); err != nil {
				t.Fatal(err)
			}
			if md, _ := m.Media(ctx); md.Image != "http://x/agent.iso" {
				t.Errorf("prebuilt ISO not inserted: %+v", md)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			in := &redfish.Inspect{Pool: newPool(t, fast)}
			n := nodeFor(lab.BMCs[0], nil)
			res, async, err := in.Inspect(ctx, n)
			if err != nil || async {
				t.Fatalf("inspect: %v async=%v", err, async)
			}
			inv := mem(lab, 0).Inventory()
			if res.Properties["cpus"] != inv.CPUCount || res.Properties["cpu_arch"] != "x86_64" || res.Properties["memory_mb"] != int64(inv.MemoryGiB*1024) {
				t.Errorf("properties %v, inventory %+v", res.Properties, inv)
			}
			if len(inv.Disks) > 0 && res.Properties["local_gb"] == nil {
				t.Errorf("no local_gb from disks %v", inv.Disks)
			}
			if len(res.MACs) != len(inv.NICs) || res.MACs[0] != strings.ToLower(inv.NICs[0].MAC) {
				t.Errorf("MACs %v, NICs %v", res.MACs, inv.NICs)
			}
			pi := res.Inventory.(proto.Inventory)
			if pi.SystemVendor.SerialNumber != inv.SerialNumber || pi.SystemVendor.Manufacturer != inv.Manufacturer || len(pi.Disks) != len(inv.Disks) {
				t.Errorf("inventory %+v vs %+v", pi, inv)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("5xx burst is retried", func(t *testing.T) {
		lab := startLab(t, 1, "generic")
		pw := &redfish.Power{Pool: newPool(t, redfish.Limits{Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Retries: 8})}
		n := nodeFor(lab.BMCs[0], nil)
		if err := lab.BMCs[0].SetFaults(bmcsim.Faults{ErrorRate: 0.4, ErrorStatus: 503}); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			for _, tg := range []proto.PowerState{proto.PowerOn, proto.PowerOff} {
				if err := pw.SetPowerState(ctx, n, tg, 10*time.Second); err != nil {
					t.Fatalf("%s through 40%% 503s: %v", tg, err)
				}
			}
		}
	})
	t.Run("dropped connections are retried", func(t *testing.T) {
		lab := startLab(t, 1, "idrac")
		pw := &redfish.Power{Pool: newPool(t, redfish.Limits{Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Retries: 8})}
		n := nodeFor(lab.BMCs[0], nil)
		_ = lab.BMCs[0].SetFaults(bmcsim.Faults{DropRate: 0.3})
		if err := pw.SetPowerState(ctx, n, proto.PowerOn, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("persistent 500 names BMC request and answer", func(t *testing.T) {
		lab := startLab(t, 1, "generic")
		pw := &redfish.Power{Pool: newPool(t, fast)}
		n := nodeFor(lab.BMCs[0], nil)
		if _, err := pw.GetPowerState(ctx, n); err != nil {
			t.Fatal(err)
		}
		_ = lab.BMCs[0].SetFaults(bmcsim.Faults{ErrorRate: 1})
		_, err := pw.GetPowerState(ctx, n)
		var be *redfish.BMCError
		if err == nil || !errors.As(err, &be) || be.Status != 500 {
			t.Fatalf("want a BMCError 500, got %v", err)
		}
		for _, want := range []string{lab.BMCs[0].URL, "GET /redfish/v1/Systems/1", "500", "GeneralError"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	})
	t.Run("slow answers", func(t *testing.T) {
		lab := startLab(t, 1, "ilo")
		pw := &redfish.Power{Pool: newPool(t, fast)}
		n := nodeFor(lab.BMCs[0], nil)
		_ = lab.BMCs[0].SetFaults(bmcsim.Faults{Latency: 150 * time.Millisecond})
		if err := pw.SetPowerState(ctx, n, proto.PowerOn, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		// An answer slower than the request timeout is a clear error.
		slow := &redfish.Power{Pool: newPool(t, redfish.Limits{RequestTimeout: 50 * time.Millisecond, Retries: -1})}
		_, err := slow.GetPowerState(ctx, n)
		if err == nil || !strings.Contains(err.Error(), "no answer") || !strings.Contains(err.Error(), lab.BMCs[0].URL) {
			t.Fatalf("slow BMC: %v", err)
		}
	})
	t.Run("401 mid-session re-creates the session", func(t *testing.T) {
		lab := startLab(t, 1, "idrac")
		pool := newPool(t, fast)
		pw := &redfish.Power{Pool: pool}
		n := nodeFor(lab.BMCs[0], proto.Dict{"redfish_auth_type": "session"})
		if err := pw.SetPowerState(ctx, n, proto.PowerOn, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		lab.BMCs[0].ExpireSessions()
		if err := pw.SetPowerState(ctx, n, proto.PowerOff, 5*time.Second); err != nil {
			t.Fatalf("after the BMC ended the session: %v", err)
		}
		if s := lab.BMCs[0].Sessions(); s != 1 {
			t.Errorf("sessions = %d, want 1 new", s)
		}
		_ = lab.BMCs[0].SetFaults(bmcsim.Faults{SessionTTL: 100 * time.Millisecond})
		for range 3 {
			time.Sleep(120 * time.Millisecond)
			if _, err := pw.GetPowerState(ctx, n); err != nil {
				t.Fatalf("with a 100 ms session TTL: %v", err)
			}
		}
	})
	t.Run("session exhaustion", func(t *testing.T) {
		lab := startLab(t, 1, "idrac")
		b := lab.BMCs[0]
		_ = b.SetFaults(bmcsim.Faults{SessionLimit: 1})
		// Someone else holds the only session.
		other := newPool(t, fast)
		if _, err := (&redfish.Power{Pool: other}).GetPowerState(ctx, nodeFor(b, proto.Dict{"redfish_auth_type": "session"})); err != nil {
			t.Fatal(err)
		}
		// session: a clear error naming the BMC's answer.
		_, err := (&redfish.Power{Pool: newPool(t, fast)}).GetPowerState(ctx, nodeFor(b, proto.Dict{"redfish_auth_type": "session"}))
		if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "RAC0218") || !strings.Contains(err.Error(), "POST /redfish/v1/SessionService/Sessions") {
			t.Fatalf("session auth with all sessions taken: %v", err)
		}
		// auto: falls back to basic auth.
		if _, err := (&redfish.Power{Pool: newPool(t, fast)}).GetPowerState(ctx, nodeFor(b, nil)); err != nil {
			t.Fatalf("auto auth with all sessions taken: %v", err)
		}
	})
}

func TestValidateBadDriverInfo(t *testing.T) {
	ctx := context.Background()
	lab := startLab(t, 1, "generic")
	b := lab.BMCs[0]
	pw := &redfish.Power{Pool: newPool(t, fast)}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	multi, err := bmcsim.NewService(bmcsim.Config{Systems: []bmcsim.SystemConfig{
		{ID: "A", Backend: bmcsim.NewMemory(1, bmcsim.Inventory{})},
		{ID: "B", Backend: bmcsim.NewMemory(2, bmcsim.Inventory{})}}})
	if err != nil {
		t.Fatal(err)
	}
	mb, err := bmcsim.Listen("127.0.0.1:0", multi)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })

	for _, c := range []struct {
		name string
		di   proto.Dict
		want []string
	}{
		{"unreachable", proto.Dict{"redfish_address": dead}, []string{dead, "no answer", "refused"}},
		{"wrong password", proto.Dict{"redfish_password": "wrong"}, []string{b.URL, "401", "redfish_password"}},
		{"wrong password basic", proto.Dict{"redfish_password": "wrong", "redfish_auth_type": "basic"}, []string{b.URL, "401"}},
		{"several systems", proto.Dict{"redfish_address": mb.URL}, []string{mb.URL, "2 systems", "redfish_system_id", "/redfish/v1/Systems/A"}},
		{"no such system", proto.Dict{"redfish_system_id": "/redfish/v1/Systems/9"}, []string{"no system", "404"}},
		{"missing address", proto.Dict{"redfish_address": ""}, []string{"missing redfish_address"}},
		{"bad auth type", proto.Dict{"redfish_auth_type": "kerberos"}, []string{"redfish_auth_type"}},
		{"bad verify_ca", proto.Dict{"redfish_verify_ca": "maybe"}, []string{"redfish_verify_ca"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := nodeFor(b, c.di)
			err := pw.Validate(ctx, n)
			if err == nil {
				t.Fatal("validate passed")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// The right system ID of a multi-system service works, as a path or an ID.
	for _, id := range []string{"/redfish/v1/Systems/B", "B"} {
		if err := pw.Validate(ctx, nodeFor(mb, proto.Dict{"redfish_system_id": id})); err != nil {
			t.Errorf("system %s: %v", id, err)
		}
	}
}

func TestShutdownLogsOut(t *testing.T) {
	ctx := context.Background()
	lab := startLab(t, 3, "generic")
	pool := redfish.NewPool(fast, nil)
	pw := &redfish.Power{Pool: pool}
	for _, b := range lab.BMCs {
		for range 3 { // reused, not one session per call
			if _, err := pw.GetPowerState(ctx, nodeFor(b, nil)); err != nil {
				t.Fatal(err)
			}
		}
		if b.Sessions() != 1 {
			t.Fatalf("sessions %d", b.Sessions())
		}
	}
	if pool.Sessions() != 3 {
		t.Fatalf("pool sessions %d", pool.Sessions())
	}
	if err := pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, b := range lab.BMCs {
		if b.Sessions() != 0 {
			t.Errorf("BMC %d still has %d sessions after Close", i, b.Sessions())
		}
	}
}

func TestConcurrencyLimitAndPacing(t *testing.T) {
	ctx := context.Background()
	svc, err := bmcsim.NewService(bmcsim.Config{Systems: []bmcsim.SystemConfig{{Backend: bmcsim.NewMemory(0, bmcsim.Inventory{})}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = svc.SetFaults(bmcsim.Faults{Latency: 20 * time.Millisecond})
	var inflight, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if v <= p || peak.CompareAndSwap(p, v) {
				break
			}
		}
		svc.ServeHTTP(w, r)
	}))
	defer srv.Close()
	n := &proto.Node{DriverInfo: proto.Dict{"redfish_address": srv.URL, "redfish_username": "admin", "redfish_password": "password"}}
	pw := &redfish.Power{Pool: newPool(t, redfish.Limits{Concurrency: 2, Interval: 10 * time.Millisecond})}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	start := time.Now()
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := pw.GetPowerState(ctx, n); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("peak concurrency %d, limit 2", p)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("20+ requests paced 10 ms apart took only %s", d)
	}
}

// TestConcurrentBootChanges: PATCHes carry If-Match. Changes from one pool
// are serialized; a stale one from another client (another controller here)
// is re-read and retried, never failed.
func TestConcurrentBootChanges(t *testing.T) {
	ctx := context.Background()
	lab := startLab(t, 1, "generic")
	pools := []*redfish.Pool{newPool(t, redfish.Limits{Concurrency: 8}), newPool(t, redfish.Limits{Concurrency: 8})}
	n := nodeFor(lab.BMCs[0], nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev := []string{"pxe", "disk", "cdrom", "bios"}[i%4]
			mg := &redfish.Management{Pool: pools[i%2]}
			if err := mg.SetBootDevice(ctx, n, dev, i%3 == 0); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// A read-back may legitimately see a later writer's value; anything
		// else is a failure.
		if !strings.Contains(err.Error(), "but reports") {
			t.Error(err)
		}
	}
}

func TestParseInfo(t *testing.T) {
	for _, c := range []struct {
		addr, want string
		ok         bool
	}{
		{"10.0.0.5", "https://10.0.0.5", true},
		{"10.0.0.5:8443", "https://10.0.0.5:8443", true},
		{"http://bmc.example:8000", "http://bmc.example:8000", true},
		{"https://[fd00::5]:443", "https://[fd00::5]:443", true},
		{"https://bmc/redfish/v1/", "https://bmc", true},
		{"ftp://bmc", "", false},
		{"https://bmc:99999", "", false},
		{"https://bmc/some/where", "", false},
	} {
		in, err := redfish.ParseInfo(&proto.Node{DriverInfo: proto.Dict{"redfish_address": c.addr}})
		if (err == nil) != c.ok || (c.ok && in.Endpoint != c.want) {
			t.Errorf("%q → %q %v, want %q ok=%v", c.addr, in.Endpoint, err, c.want, c.ok)
		}
	}
	in, err := redfish.ParseInfo(&proto.Node{DriverInfo: proto.Dict{"redfish_address": "x", "redfish_verify_ca": "False", "redfish_auth_type": "Basic"}})
	if err != nil || in.VerifyCA || in.AuthType != redfish.AuthBasic {
		t.Errorf("%+v %v", in, err)
	}
	in, err = redfish.ParseInfo(&proto.Node{DriverInfo: proto.Dict{"redfish_address": "x", "redfish_verify_ca": "/etc/ssl/bmc.pem"}})
	if err != nil || !in.VerifyCA || in.CAFile != "/etc/ssl/bmc.pem" || in.AuthType != redfish.AuthAuto {
		t.Errorf("%+v %v", in, err)
	}
}

func TestRegistered(t *testing.T) {
	h, ok := driver.Lookup("redfish")
	if !ok {
		t.Fatal("redfish hardware type not registered")
	}
	for iface, impl := range map[string]string{"power": "redfish", "management": "redfish", "boot": "ipxe", "inspect": "redfish", "deploy": "direct"} {
		if err := h.Check(iface, impl); err != nil {
			t.Error(err)
		}
	}
	for _, boot := range []string{"ipxe", "redfish-virtual-media", "fake"} {
		n := &proto.Node{Driver: "redfish", PowerInterface: "redfish", ManagementInterface: "redfish", BootInterface: boot, InspectInterface: "redfish", DeployInterface: "direct"}
		if _, err := driver.Resolve(n); err != nil {
			t.Errorf("resolve with boot %s: %v", boot, err)
		}
	}
}

var _ = fmt.Sprint

// TestTLS: BMCs serve self-signed certificates; redfish_verify_ca decides
// whether that is accepted, or which CA bundle vouches for it.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	cert, _, err := bmcsim.SelfSignedCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := bmcsim.NewService(bmcsim.Config{Personality: "idrac", Systems: []bmcsim.SystemConfig{{Backend: bmcsim.NewMemory(0, bmcsim.Inventory{})}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bmcsim.ListenTLS("127.0.0.1:0", svc, &cert)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.URL, "https://") {
		t.Fatalf("URL %s", b.URL)
	}
	bundle := filepath.Join(t.TempDir(), "bmc-ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := &redfish.Power{Pool: newPool(t, fast)}
	if err := pw.Validate(ctx, nodeFor(b, nil)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("self-signed certificate verified by default: %v", err)
	}
	for _, v := range []any{false, "False", bundle} {
		if err := pw.Validate(ctx, nodeFor(b, proto.Dict{"redfish_verify_ca": v, "redfish_username": "admin"})); err != nil {
			t.Errorf("redfish_verify_ca=%v: %v", v, err)
		}
	}
}
