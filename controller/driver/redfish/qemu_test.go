package redfish_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// serialSegment returns the serial output of power-on n (1-based), split on
// the markers the QEMU backend writes before each start.
func serialSegment(log string, n int) string {
	b, _ := os.ReadFile(log)
	parts := strings.Split(string(b), "[kiln-bmcsim] power-on ")
	if n >= len(parts) {
		return ""
	}
	return parts[n]
}

// firstDevice is the device SeaBIOS tried first in a serial segment.
func firstDevice(seg string) string {
	best, which := -1, ""
	for dev, marker := range map[string]string{"pxe": "Booting from ROM", "disk": "Booting from Hard Disk", "cd": "Booting from DVD/CD"} {
		if i := strings.Index(seg, marker); i >= 0 && (best < 0 || i < best) {
			best, which = i, dev
		}
	}
	return which
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestQEMUPxeOnceThenDisk drives a real VM through the driver: with a
// pxe/once override the first power-on boots from the network; the reboot
// after it boots from disk, because the BMC used the override up.
func TestQEMUPxeOnceThenDisk(t *testing.T) {
	testtool.Need(t, "qemu-system-x86_64")
	ctx := context.Background()
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:12:34:57"
	q, err := bmcsim.NewQEMU(bmcsim.QEMUConfig{Dir: filepath.Join(dir, "vm"), Disk: disk, MAC: mac, CPUs: 1, MemoryMiB: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	svc, err := bmcsim.NewService(bmcsim.Config{Systems: []bmcsim.SystemConfig{{ID: "vm0", Backend: q}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bmcsim.Listen("127.0.0.1:0", svc)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pool := newPool(t, fast)
	pw, mg, in := &redfish.Power{Pool: pool}, &redfish.Management{Pool: pool}, &redfish.Inspect{Pool: pool}
	n := nodeFor(b, nil)
	if err := pw.Validate(ctx, n); err != nil {
		t.Fatal(err)
	}
	res, _, err := in.Inspect(ctx, n)
	if err != nil || len(res.MACs) != 1 || res.MACs[0] != mac {
		t.Fatalf("inspect MACs %v %v", res.MACs, err)
	}
	if err := mg.SetBootDevice(ctx, n, "pxe", false); err != nil {
		t.Fatal(err)
	}
	if err := pw.SetPowerState(ctx, n, proto.PowerOn, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	log := q.SerialLog()
	waitUntil(t, "iPXE DHCP on power-on 1", 45*time.Second, func() bool {
		return strings.Contains(serialSegment(log, 1), "Configuring (net0 "+mac+")")
	})
	if got := firstDevice(serialSegment(log, 1)); got != "pxe" {
		t.Errorf("power-on 1 booted %s first, want pxe", got)
	}
	if bd, err := mg.GetBootDevice(ctx, n); err != nil || bd.Device != "" {
		t.Errorf("override after the PXE boot: %+v %v (want used up)", bd, err)
	}
	if err := pw.SetPowerState(ctx, n, proto.PowerRebooting, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "disk boot on power-on 2", 30*time.Second, func() bool {
		return strings.Contains(serialSegment(log, 2), "Booting from Hard Disk")
	})
	if got := firstDevice(serialSegment(log, 2)); got != "disk" {
		t.Errorf("power-on 2 booted %s first, want disk", got)
	}
	if err := pw.SetPowerState(ctx, n, proto.PowerOff, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if ps, err := pw.GetPowerState(ctx, n); err != nil || ps != proto.PowerOff {
		t.Fatalf("final power %q %v", ps, err)
	}
}
