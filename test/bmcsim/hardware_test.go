package bmcsim

import (
	"context"
	"net/http"
	"testing"

	"github.com/stmcginnis/gofish/schemas"
)

// TestGofishManagerVirtualMedia inserts and ejects media through the
// manager's VirtualMedia collection, which every personality has (Ironic and
// sushy look there), and for generic also through the system's.
func TestGofishManagerVirtualMedia(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc := startLab(t, 1, name).BMCs[0]
			mem := bmc.Backend(bmc.SystemIDs()[0]).(*Memory)
			c := connect(t, bmc, true)
			mgrs, err := c.Service.Managers()
			if err != nil || len(mgrs) != 1 {
				t.Fatalf("managers %v %v", mgrs, err)
			}
			vms, err := mgrs[0].VirtualMedia()
			if err != nil || len(vms) != 1 || vms[0].ID != bmc.Personality().VirtualMediaID {
				t.Fatalf("manager virtual media %+v %v", vms, err)
			}
			const iso = "http://10.0.2.2:8080/mgr.iso"
			if _, err := vms[0].InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: iso}); err != nil {
				t.Fatalf("insert: %v", err)
			}
			if m, _ := mem.Media(context.Background()); !m.Inserted || m.Image != iso {
				t.Fatalf("backend media after manager insert: %+v", m)
			}
			systems, _ := c.Service.Systems()
			sysVMs, err := systems[0].VirtualMedia()
			if bmc.Personality().VirtualMediaOnManager {
				if len(sysVMs) != 0 {
					t.Errorf("%s has system virtual media %v", name, sysVMs)
				}
			} else if err != nil || len(sysVMs) != 1 || sysVMs[0].Image != iso {
				t.Errorf("system view of the same CD: %+v %v", sysVMs, err)
			}
			if _, err := vms[0].EjectMedia(); err != nil {
				t.Fatalf("eject: %v", err)
			}
			if m, _ := mem.Media(context.Background()); m.Inserted {
				t.Error("still inserted after eject")
			}
		})
	}
}

// TestGofishManagerReset resets the BMC: the action is advertised, bad types
// are refused, and sessions end as on a real BMC reboot.
func TestGofishManagerReset(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc := startLab(t, 1, name).BMCs[0]
			c := connect(t, bmc, false)
			mgrs, err := c.Service.Managers()
			if err != nil || len(mgrs) != 1 {
				t.Fatalf("managers %v %v", mgrs, err)
			}
			u, p := bmc.Credentials()
			target := bmc.URL + mgrs[0].ODataID + "/Actions/Manager.Reset"
			if st, _, m := do(t, nil, "POST", target, u, p, map[string]any{"ResetType": "PushPowerButton"}); st != http.StatusBadRequest {
				t.Errorf("PushPowerButton for a manager: %d %v", st, m)
			}
			if bmc.ManagerResets() != 0 {
				t.Fatal("refused reset counted")
			}
			if _, err := mgrs[0].Reset(schemas.GracefulRestartResetType); err != nil {
				t.Fatalf("manager reset: %v", err)
			}
			if bmc.ManagerResets() != 1 || bmc.Sessions() != 0 {
				t.Errorf("after manager reset: resets %d sessions %d", bmc.ManagerResets(), bmc.Sessions())
			}
		})
	}
}

// TestGofishIndicatorLED writes IndicatorLED and LocationIndicatorActive and
// reads both back consistent.
func TestGofishIndicatorLED(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc := startLab(t, 1, name).BMCs[0]
			c := connect(t, bmc, true)
			systems, _ := c.Service.Systems()
			sys := systems[0]
			if sys.IndicatorLED != schemas.OffIndicatorLED || sys.LocationIndicatorActive == nil || *sys.LocationIndicatorActive {
				t.Fatalf("initial LED %q %v", sys.IndicatorLED, sys.LocationIndicatorActive)
			}
			sys.IndicatorLED = schemas.BlinkingIndicatorLED
			if err := sys.Update(); err != nil {
				t.Fatalf("set IndicatorLED: %v", err)
			}
			sys = refresh(t, c, sys)
			if sys.IndicatorLED != schemas.BlinkingIndicatorLED || !*sys.LocationIndicatorActive {
				t.Fatalf("after Blinking: %q %v", sys.IndicatorLED, *sys.LocationIndicatorActive)
			}
			off := false
			sys.LocationIndicatorActive = &off
			if err := sys.Update(); err != nil {
				t.Fatalf("set LocationIndicatorActive: %v", err)
			}
			if sys = refresh(t, c, sys); sys.IndicatorLED != schemas.OffIndicatorLED {
				t.Errorf("after LocationIndicatorActive=false: %q", sys.IndicatorLED)
			}
			u, p := bmc.Credentials()
			if st, _, m := do(t, nil, "PATCH", bmc.URL+sys.ODataID, u, p, map[string]any{"IndicatorLED": "Purple"}); st != 400 {
				t.Errorf("bad LED value: %d %v", st, m)
			}
		})
	}
}

// TestGofishMemory lists the DIMMs, which add up to the inventory's memory.
func TestGofishMemory(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc := startLab(t, 1, name).BMCs[0]
			c := connect(t, bmc, true)
			systems, _ := c.Service.Systems()
			dimms, err := systems[0].Memory()
			if err != nil || len(dimms) == 0 {
				t.Fatalf("memory %v %v", dimms, err)
			}
			total := 0
			for _, d := range dimms {
				total += *d.CapacityMiB
			}
			if want := bmc.Backend(bmc.SystemIDs()[0]).Inventory().MemoryGiB * 1024; total != want {
				t.Errorf("DIMMs add up to %d MiB, want %d", total, want)
			}
		})
	}
}

// TestGofishSecureBoot enables secure boot, which takes effect at the next
// boot, and deletes the keys, which leaves it off in SetupMode.
func TestGofishSecureBoot(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc := startLab(t, 1, name).BMCs[0]
			c := connect(t, bmc, true)
			systems, _ := c.Service.Systems()
			sys := systems[0]
			get := func() *schemas.SecureBoot {
				t.Helper()
				sb, err := sys.SecureBoot()
				if err != nil {
					t.Fatalf("secure boot: %v", err)
				}
				return sb
			}
			sb := get()
			if sb.SecureBootEnable || sb.SecureBootCurrentBoot != schemas.DisabledSecureBootCurrentBootType || sb.SecureBootMode != schemas.UserModeSecureBootModeType {
				t.Fatalf("initial %+v", sb)
			}
			sb.SecureBootEnable = true
			if err := sb.Update(); err != nil {
				t.Fatalf("enable: %v", err)
			}
			if sb = get(); !sb.SecureBootEnable || sb.SecureBootCurrentBoot != schemas.DisabledSecureBootCurrentBootType {
				t.Fatalf("before reboot %+v", sb)
			}
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatal(err)
			}
			if sb = get(); sb.SecureBootCurrentBoot != schemas.EnabledSecureBootCurrentBootType {
				t.Fatalf("after boot %+v", sb)
			}
			if _, err := sb.ResetKeys(schemas.DeleteAllKeysResetKeysType); err != nil {
				t.Fatalf("reset keys: %v", err)
			}
			if _, err := sys.Reset(schemas.ForceRestartResetType); err != nil {
				t.Fatal(err)
			}
			if sb = get(); sb.SecureBootMode != schemas.SetupModeSecureBootModeType || sb.SecureBootCurrentBoot != schemas.DisabledSecureBootCurrentBootType {
				t.Errorf("after DeleteAllKeys and reboot %+v", sb)
			}
			if _, err := sb.ResetKeys("Bogus"); err == nil {
				t.Error("bogus ResetKeysType accepted")
			}
		})
	}
}
