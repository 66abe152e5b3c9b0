package raid_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/efi"
	"github.com/kilnhq/kiln/agent/hwmgr"
	"github.com/kilnhq/kiln/agent/raid"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/proto"
)

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, size); err != nil {
		t.Fatal(err)
	}
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--partscan", f))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

func needRAID(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices and md arrays")
	}
	testtool.Need(t, append([]string{"mdadm", "losetup", "wipefs", "sgdisk", "blockdev"}, tools...)...)
	if _, err := os.Stat("/proc/mdstat"); err != nil {
		t.Skip("the kernel has no md driver (/proc/mdstat missing): software RAID cannot be built here")
	}
}

// arrayOn is the running md array built on exactly disks, if any.
func arrayOn(t *testing.T, disks ...string) (disk.MDArray, bool) {
	t.Helper()
	arrays, err := disk.MDArrays("")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arrays {
		d := slices.Clone(a.Disks)
		slices.Sort(d)
		if slices.Equal(d, disks) {
			return a, true
		}
	}
	return disk.MDArray{}, false
}

// stopArraysOn stops, when the test ends and before the loop devices go
// (cleanups run last first), every array left on disks.
func stopArraysOn(t *testing.T, disks []string) {
	t.Cleanup(func() {
		arrays, _ := disk.MDArrays("")
		for _, a := range arrays {
			if len(a.Disks) > 0 && !slices.ContainsFunc(a.Disks, func(d string) bool { return !slices.Contains(disks, d) }) {
				exec.Command("mdadm", "--stop", a.Name).Run()
			}
		}
	})
}

const mdMagic = 0xa92b4efc

// superblockAt reads the md magic where metadata 1.2 keeps it (4 KiB into
// the member) on the raw disk.
func superblockAt(t *testing.T, dev string, off int64) uint32 {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, off+4096); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b)
}

// TestSoftwareRAIDOnLoopDevices builds RAID-1 over two loop devices with
// the clean step, deploys a whole-disk image to the md device chosen as
// the root device, finds the image on both members, then deletes the
// configuration and checks the superblocks and partitions are gone.
func TestSoftwareRAIDOnLoopDevices(t *testing.T) {
	needRAID(t)
	a, b := loopDevice(t, 320<<20), loopDevice(t, 320<<20)
	disks := []string{a, b}
	slices.Sort(disks)
	stopArraysOn(t, disks)
	safety := steps.Safety{Allow: []string{a, b}}
	var n steps.Node
	if err := json.Unmarshal([]byte(`{"uuid":"n1","properties":{"capabilities":"boot_mode:bios"},
		"target_raid_config":{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software",
		"is_root_volume":true,"volume_name":"kilntest"}]}}`), &n); err != nil {
		t.Fatal(err)
	}
	mgr := steps.MustManager("generic_hardware_manager", "1.0", steps.SupportGeneric, raid.New(raid.Options{}).Steps()...)
	call := func(name string) (any, error) {
		return mgr.Execute(context.Background(), steps.Call{Kind: proto.StepClean, Node: n, Safety: safety,
			Step: proto.StepCall{Step: proto.Step{Step: name, Interface: "raid"}}})
	}

	res, err := call(raid.StepCreate)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, n["target_raid_config"]) {
		t.Fatalf("create_configuration returned %v, want the target config (IPA's raid_config)", res)
	}
	arr, ok := arrayOn(t, disks...)
	if !ok {
		t.Fatalf("no md array on %v", disks)
	}
	wantMembers := []string{disk.PartitionPath(a, 1), disk.PartitionPath(b, 1)}
	slices.Sort(wantMembers)
	got := slices.Clone(arr.Members)
	slices.Sort(got)
	if !slices.Equal(got, wantMembers) {
		t.Fatalf("members %v, want %v", got, wantMembers)
	}
	detail := run(t, "mdadm", "--detail", arr.Name)
	if !strings.Contains(detail, "Raid Level : raid1") || !strings.Contains(detail, "kilntest") {
		t.Fatalf("mdadm --detail %s:\n%s", arr.Name, detail)
	}
	for _, d := range disks {
		parts, err := disk.KernelPartitions(d)
		if err != nil || len(parts) != 1 || parts[0].Start != 1<<20 {
			t.Fatalf("%s partitions %+v (%v), want one from 1 MiB", d, parts, err)
		}
	}
	// A second create finds the partitions and refuses, as IPA does.
	if _, err := call(raid.StepCreate); err == nil || !strings.Contains(err.Error(), "partitions detected") {
		t.Fatalf("second create: %v", err)
	}

	// The array is the root device a hint names; its disks are no longer
	// candidates (a hint naming one finds nothing).
	hw := hwmgr.New(hwmgr.Options{ImageRetries: -1})
	if _, err := hw.RootDevice(n, map[string]any{"name": a}, safety); err == nil {
		t.Fatalf("root device hint naming member %s matched", a)
	}
	n["instance_info"] = map[string]any{"root_device": map[string]any{"name": arr.Name}}
	root, err := hw.RootDevice(n, nil, safety)
	if err != nil || root.Name != arr.Name {
		t.Fatalf("root device %q (%v), want %s", root.Name, err, arr.Name)
	}

	// Deploy a whole-disk image onto it.
	img := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+4M", "-t1:EF00", "-n2:0:0", "-t2:8300", img)
	pattern := bytes.Repeat([]byte("kiln software raid "), 4096)
	const patternAt = 8 << 20 // inside partition 2
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(pattern, patternAt); err != nil {
		t.Fatal(err)
	}
	f.Close()
	raw, _ := os.ReadFile(img)
	sum := sha256.Sum256(raw)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, img) }))
	defer srv.Close()
	wr, err := hw.WriteImage(context.Background(), steps.ImageRequest{Safety: safety, Node: n,
		Info: proto.ImageInfo{ID: "image", URLs: []string{srv.URL + "/image.raw"}, OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(sum[:])}})
	if err != nil {
		t.Fatal(err)
	}
	if wr.Device != arr.Name {
		t.Fatalf("image written to %s, want %s", wr.Device, arr.Name)
	}
	// Both members hold the image: at the member's data offset.
	dataOffset := regexp.MustCompile(`Data Offset : (\d+) sectors`)
	for _, p := range wantMembers {
		m := dataOffset.FindStringSubmatch(run(t, "mdadm", "--examine", p))
		if m == nil {
			t.Fatalf("no data offset for %s", p)
		}
		sectors, _ := strconv.ParseInt(m[1], 10, 64)
		run(t, "blockdev", "--flushbufs", p)
		mf, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(pattern))
		_, err = mf.ReadAt(buf, sectors*512+patternAt)
		mf.Close()
		if err != nil || !bytes.Equal(buf, pattern) {
			t.Fatalf("member %s does not hold the image at data offset %d sectors (%v)", p, sectors, err)
		}
	}
	for _, d := range disks {
		if got := superblockAt(t, d, 1<<20); got != mdMagic {
			t.Fatalf("%s: md magic %#x at 1 MiB + 4 KiB, want %#x", d, got, mdMagic)
		}
	}

	// delete_configuration: array stopped, superblocks and tables gone.
	if _, err := call(raid.StepDelete); err != nil {
		t.Fatal(err)
	}
	if arr2, ok := arrayOn(t, disks...); ok {
		t.Fatalf("array %s still runs", arr2.Name)
	}
	if _, err := os.Stat("/sys/block/" + filepath.Base(arr.Name) + "/slaves/" + filepath.Base(wantMembers[0])); err == nil {
		t.Fatalf("%s still has members", arr.Name)
	}
	for _, d := range disks {
		if got := superblockAt(t, d, 1<<20); got == mdMagic {
			t.Fatalf("%s: md superblock left", d)
		}
		if parts, _ := disk.KernelPartitions(d); len(parts) != 0 {
			t.Fatalf("%s still has partitions %+v", d, parts)
		}
		if out, _ := exec.Command("wipefs", d).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
			t.Fatalf("%s still has signatures:\n%s", d, out)
		}
	}
	// And the disks can be built on again.
	if _, err := call(raid.StepCreate); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	if _, err := call(raid.StepDelete); err != nil {
		t.Fatal(err)
	}
}

// TestSoftwareRAIDUEFIBootsFromEveryMember builds RAID-1 for UEFI over two
// loop devices, deploys a whole-disk image with an ESP onto the array and
// installs the boot loader: each member's own ESP holds the image's ESP
// (mirrored by an md array with metadata 1.0) and has its own boot entry.
func TestSoftwareRAIDUEFIBootsFromEveryMember(t *testing.T) {
	needRAID(t)
	a, b := loopDevice(t, 700<<20), loopDevice(t, 700<<20)
	disks := []string{a, b}
	slices.Sort(disks)
	stopArraysOn(t, disks)
	safety := steps.Safety{Allow: []string{a, b}}
	var n steps.Node
	if err := json.Unmarshal([]byte(`{"uuid":"n1","properties":{"capabilities":"boot_mode:uefi"},
		"target_raid_config":{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}}`), &n); err != nil {
		t.Fatal(err)
	}
	r := raid.New(raid.Options{})
	if _, err := r.Create(context.Background(), n, safety); err != nil {
		t.Fatal(err)
	}
	for _, d := range disks {
		tab, err := disk.ReadTable(d)
		if err != nil || tab.Type != "gpt" || len(tab.Partitions) != 2 || tab.Partitions[0].Type != disk.GPTTypeESP ||
			tab.Partitions[0].Start != 1<<20 || tab.Partitions[0].Size != 550<<20 || tab.Partitions[1].Start != 551<<20 {
			t.Fatalf("%s table %+v (%v): want an ESP at 1 MiB of 550 MiB, then the RAID partition", d, tab, err)
		}
	}
	arr, ok := arrayOn(t, disks...)
	if !ok {
		t.Fatal("no array")
	}

	// A whole-disk image with a 40 MiB FAT32 ESP holding the fallback loader.
	dir := t.TempDir()
	const espStart, espLen = 1 << 20, 40 << 20
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+40M", "-t1:EF00", "-n2:0:0", "-t2:8300", img)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fat32.Create(file.New(f, false), espLen, espStart, 512, "ESP", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir("/EFI/BOOT"); err != nil {
		t.Fatal(err)
	}
	lf, err := fsys.OpenFile("/EFI/BOOT/BOOTX64.EFI", os.O_CREATE|os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lf.Write([]byte("MZ not really a PE image")); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	f.Close()
	raw, _ := os.ReadFile(img)
	espBytes := raw[espStart : espStart+espLen]
	sum := sha256.Sum256(raw)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, img) }))
	defer srv.Close()

	n["instance_info"] = map[string]any{"root_device": map[string]any{"name": arr.Name}}
	vars := t.TempDir()
	hw := hwmgr.New(hwmgr.Options{ImageRetries: -1, EFIVarsDir: vars, RAID: r})
	wr, err := hw.WriteImage(context.Background(), steps.ImageRequest{Safety: safety, Node: n,
		Info: proto.ImageInfo{ID: "image", URLs: []string{srv.URL + "/disk.img"}, OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(sum[:])}})
	if err != nil || wr.Device != arr.Name {
		t.Fatalf("image written to %q (%v), want %s", wr.Device, err, arr.Name)
	}
	if err := hw.InstallBootloader(context.Background(), proto.InstallBootloaderParams{TargetBootMode: "uefi"}, safety); err != nil {
		t.Fatal(err)
	}
	entries, err := (efi.Vars{Dir: vars}).BootEntries()
	if err != nil || len(entries) != 2 {
		t.Fatalf("boot entries %+v (%v), want one per member", entries, err)
	}
	var guids []string
	for _, d := range disks {
		tab, _ := disk.ReadTable(d)
		g, _ := disk.GUIDBytes(tab.Partitions[0].UUID)
		guids = append(guids, string(g[:]))
		p := disk.PartitionPath(d, 1)
		run(t, "blockdev", "--flushbufs", p)
		got := make([]byte, len(espBytes))
		pf, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pf.ReadAt(got, 0)
		pf.Close()
		if err != nil || !bytes.Equal(got, espBytes) {
			t.Fatalf("%s does not start with the image's ESP (%v)", p, err)
		}
	}
	for _, e := range entries {
		if !strings.Contains(e.Option.Description, "(RAID member") || !slices.Contains(guids, string(e.Option.Disk.PartitionGUID[:])) {
			t.Fatalf("entry %+v: want a RAID member's ESP", e.Option)
		}
	}

	// delete_configuration removes both arrays, the data and the ESP mirror.
	if err := r.Delete(context.Background(), safety); err != nil {
		t.Fatal(err)
	}
	arrays, _ := disk.MDArrays("")
	for _, x := range arrays {
		if slices.ContainsFunc(x.Disks, func(d string) bool { return slices.Contains(disks, d) }) {
			t.Fatalf("array %s left on %v", x.Name, x.Disks)
		}
	}
}
