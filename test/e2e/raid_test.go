//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/fat"
	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/phases"
)

// TestSoftwareRAID1Root is a UEFI machine with two virtual disks whose
// root is a software RAID-1 across both, as Metal3 and Ironic build it:
// target_raid_config asks for it (controller "software", the agent raid
// interface), a manual clean builds it (delete_configuration,
// create_configuration), the deploy writes good.raw.zst to the array and
// install_bootloader puts the image's ESP and a boot entry on both
// members; the machine then boots the deployed OS, and boots it again from
// the second disk alone.
func TestSoftwareRAID1Root(t *testing.T) {
	// 5 GiB disks: the array (the disk less the 551 MiB IPA leaves for the
	// ESP) must pass the 4 GiB a root device needs without a hint.
	l := newLab(t, "raid1", labOpts{uefi: true, disk: "raw", diskSize: "5G", extraDisks: 1})
	defer l.summary()
	l.enroll("ipxe", false)
	l.api("PATCH", "/v1/nodes/"+l.node, []map[string]any{
		{"op": "replace", "path": "/raid_interface", "value": "agent"},
		{"op": "add", "path": "/properties/capabilities", "value": "boot_mode:uefi"},
	}, nil)
	l.api("PUT", "/v1/nodes/"+l.node+"/states/raid", map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software", "is_root_volume": true},
	}}, nil)
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	bmcBefore := l.redfishFirmware("BMC")

	// One manual clean as Metal3 asks for it: the RAID (built in band by
	// the agent), a firmware update and BIOS settings (out of band, on the
	// BMC). The firmware step (the BMC's image: a BMC reset, no reboot of
	// the machine) goes before the BIOS one, whose reboot then ends the
	// clean: BIOS first would reboot into the agent once more.
	p := l.begin()
	rec := l.recordPhases()
	l.provision("clean", map[string]any{"clean_steps": []any{
		map[string]any{"interface": "raid", "step": "delete_configuration"},
		map[string]any{"interface": "raid", "step": "create_configuration"},
		map[string]any{"interface": "firmware", "step": "update", "args": map[string]any{"settings": []any{
			map[string]any{"component": "bmc", "url": "http://firmware.example/bmc-6.5.4.bin"}}}},
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{
			map[string]any{"name": "ProcVirtualization", "value": "Disabled"}}}},
	}})
	l.waitState("manageable", 5*time.Minute, p)
	l.phaseTimings("clean (RAID-1, BMC firmware, BIOS)", p, time.Now())
	l.t.Logf("clean phases:\n%s", phases.Table("raid1", rec.Stop()))
	var bios struct {
		Bios []struct{ Name, Value string }
	}
	l.api("GET", "/v1/nodes/"+l.node+"/bios", nil, &bios)
	if got := l.redfishBIOS("ProcVirtualization"); got != "Disabled" || !slices.Contains(bios.Bios, struct{ Name, Value string }{"ProcVirtualization", "Disabled"}) {
		t.Errorf("ProcVirtualization after the clean: BMC %q, /bios %+v", got, bios.Bios)
	}
	type component struct {
		Component string `json:"component"`
		Current   string `json:"current_version"`
		Flashed   string `json:"last_version_flashed"`
	}
	var fw struct{ Firmware []component }
	l.api("GET", "/v1/nodes/"+l.node+"/firmware", nil, &fw)
	bmcNow := l.redfishFirmware("BMC")
	if i := slices.IndexFunc(fw.Firmware, func(c component) bool { return c.Component == "bmc" }); i < 0 ||
		fw.Firmware[i].Current != "6.5.4" || fw.Firmware[i].Flashed != "6.5.4" || bmcNow != "6.5.4" || bmcBefore == bmcNow {
		t.Errorf("BMC firmware %s → %s on the BMC; /firmware %+v", bmcBefore, bmcNow, fw.Firmware)
	}
	var rc struct {
		RAIDConfig struct {
			LogicalDisks []struct {
				RAIDLevel  string `json:"raid_level"`
				Controller string `json:"controller"`
				Root       bool   `json:"is_root_volume"`
			} `json:"logical_disks"`
		} `json:"raid_config"`
	}
	l.api("GET", "/v1/nodes/"+l.node+"?fields=raid_config", nil, &rc)
	if lds := rc.RAIDConfig.LogicalDisks; len(lds) != 1 || lds[0].RAIDLevel != "1" || lds[0].Controller != "software" || !lds[0].Root {
		t.Fatalf("raid_config after create_configuration: %+v, want one software RAID-1 root volume", rc.RAIDConfig)
	}

	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	l.setImage("good.raw.zst", "raw", sha256Of(t, "good.raw.zst"))
	ons := l.vm.PowerOns()
	p = l.begin()
	l.provision("active", nil)
	l.waitState("active", 6*time.Minute, p)
	l.phaseTimings("deploy", p, time.Now())
	deploy := l.serialSince(ons)
	// The deploy's agent assembled the array, wrote the image to it and
	// made each member bootable.
	if !strings.Contains(deploy, `msg="writing image"`) || !lineHas(deploy, `msg="writing image"`, "device=/dev/md") {
		t.Errorf("the image was not written to an md array; agent lines: %q", linesWith(deploy, "writing image", "software RAID", "root device"))
	}
	for _, member := range []string{"/dev/vda", "/dev/vdb"} {
		if !lineHas(deploy, `msg="UEFI boot entry written"`, "device="+member+" ") {
			t.Errorf("no UEFI boot entry for RAID member %s; agent lines: %q", member, linesWith(deploy, "boot entry", "boot loader"))
		}
	}
	line := l.waitMarker(ons, 3*time.Minute)
	t.Logf("deployed OS: %s", line)
	if !strings.Contains(line, "image=good") {
		t.Errorf("the array booted %q, want image=good", line)
	}

	// Power off, then look at both disks: each member holds the RAID-1
	// partition (the same array) and an ESP with the image's boot loader.
	l.api("PUT", "/v1/nodes/"+l.node+"/states/power", map[string]any{"target": "power off"}, nil)
	waitOff(t, l.vm)
	var arrays [][]byte
	for _, f := range []string{"disk.raw", "disk1.raw"} {
		arrays = append(arrays, checkMember(t, filepath.Join(l.dir, f)))
	}
	if len(arrays) == 2 && (arrays[0] == nil || !bytes.Equal(arrays[0], arrays[1])) {
		t.Errorf("the members' md superblocks name arrays %x and %x, want one", arrays[0], arrays[1])
	}

	// The first disk fails: the second boots the deployed OS alone (its
	// own ESP, the boot entries kept in the machine's UEFI variables).
	start := time.Now()
	line = bootAlone(t, secondDiskOnly(t, l))
	l.timing("second disk alone: power on → deployed OS marker", time.Since(start))
	if !strings.Contains(line, "image=good") {
		t.Errorf("the second disk booted %q, want image=good", line)
	}
}

// mdMagic starts an md superblock (version 1), little-endian.
const mdMagic = 0xa92b4efc

// checkMember checks one RAID member disk image: GPT, an ESP whose FAT
// holds the image's UEFI loader, and a partition carrying an md 1.2
// superblock (4 KiB in). It returns the superblock's array UUID.
func checkMember(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := disk.ReadTableFrom(f, fi.Size(), 512)
	if err != nil {
		t.Errorf("%s: %v", filepath.Base(path), err)
		return nil
	}
	var uuid []byte
	sawESP := false
	for _, part := range tbl.Partitions {
		switch {
		case part.Type == disk.GPTTypeESP:
			sawESP = true
			fsys, err := fat.Open(io.NewSectionReader(f, part.Start, part.Size), part.Size)
			if err != nil {
				t.Errorf("%s: ESP (partition %d): %v", filepath.Base(path), part.Number, err)
				continue
			}
			if e, err := fsys.Stat("EFI/BOOT/BOOTX64.EFI"); err != nil || e.IsDir {
				t.Errorf("%s: ESP (partition %d) lacks the image's EFI/BOOT/BOOTX64.EFI: %v", filepath.Base(path), part.Number, err)
			}
		default:
			sb := make([]byte, 32)
			if _, err := f.ReadAt(sb, part.Start+4096); err == nil && binary.LittleEndian.Uint32(sb) == mdMagic {
				uuid = bytes.Clone(sb[16:32])
			}
		}
	}
	if !sawESP {
		t.Errorf("%s: no EFI system partition among %+v", filepath.Base(path), tbl.Partitions)
	}
	if uuid == nil {
		t.Errorf("%s: no partition carries an md superblock: %+v", filepath.Base(path), tbl.Partitions)
	}
	return uuid
}

// secondDiskOnly is the lab's machine with its first disk pulled: the
// second disk alone, the machine's UEFI variables (its boot entries), no
// network boot.
func secondDiskOnly(t *testing.T, l *lab) *bmcsim.QEMU {
	t.Helper()
	dir := filepath.Join(l.dir, "vm2")
	vm, err := bmcsim.NewQEMU(bmcsim.QEMUConfig{
		Dir: dir, UEFI: true, MAC: l.mac, Disk: filepath.Join(l.dir, "disk1.raw"),
		OVMFVars: filepath.Join(l.dir, "vm", "OVMF_VARS.fd"),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(vm.SerialLog()); err == nil {
				t.Logf("second-disk boot, serial log (last 4 KiB):\n%s", tail(string(b), 4096))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = vm.Close(ctx)
	})
	return vm
}

// waitOff waits until the BMC's machine is off (the power request returns
// before the conductor acted).
func waitOff(t *testing.T, vm *bmcsim.QEMU) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ps, _ := vm.PowerState(context.Background()); ps == bmcsim.PowerOff {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the machine is still on 2 minutes after power off was asked")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// tcgTimerPanic is the guest kernel giving up on its timer check, which
// TCG on a host loaded far beyond its cores can fail: the machine, not
// the disk, then did not boot.
const tcgTimerPanic = "IO-APIC + timer doesn't work"

// bootAlone powers vm on and returns the deployed OS's marker line. A boot
// that ends in tcgTimerPanic is powered on again (at most three boots):
// the disk got as far as starting the deployed kernel, which is what is
// tested.
func bootAlone(t *testing.T, vm *bmcsim.QEMU) string {
	t.Helper()
	ctx := context.Background()
	for boot := 1; ; boot++ {
		if err := vm.Reset(ctx, bmcsim.ResetOn); err != nil {
			t.Fatal(err)
		}
		line, panicked := waitMarkerIn(t, vm.SerialLog(), boot-1, 4*time.Minute)
		if !panicked {
			return line
		}
		if boot == 3 {
			t.Fatalf("the deployed kernel panicked (%s) on all %d boots from the second disk", tcgTimerPanic, boot)
		}
		t.Logf("boot %d from the second disk: the deployed kernel started but panicked (%s, TCG under load); powering on again", boot, tcgTimerPanic)
		if err := vm.Reset(ctx, bmcsim.ResetForceOff); err != nil {
			t.Fatal(err)
		}
	}
}

// waitMarkerIn waits for the deployed OS's marker line in a serial log,
// in the output of power-ons after the first `after` ones; panicked
// reports the kernel's tcgTimerPanic instead.
func waitMarkerIn(t *testing.T, log string, after int, timeout time.Duration) (line string, panicked bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(log)
		parts := strings.Split(string(b), "[kiln-bmcsim] power-on ")
		if after+1 < len(parts) {
			s := strings.Join(parts[after+1:], "")
			if i := strings.Index(s, Marker); i >= 0 {
				line := s[i:]
				if j := strings.IndexAny(line, "\r\n"); j >= 0 {
					return line[:j], false
				}
			}
			if strings.Contains(s, tcgTimerPanic) {
				return "", true
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("no %s line in %s within %v", Marker, log, timeout)
	return "", false
}

// lineHas: some line of s contains both msg and field.
func lineHas(s, msg, field string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, msg) && strings.Contains(line+" ", field) {
			return true
		}
	}
	return false
}

// linesWith are the lines of s containing any of subs (for error messages).
func linesWith(s string, subs ...string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}
