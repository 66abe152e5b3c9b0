package ironicinterop

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/internal/testtool"
)

const loopSize = 256 << 20

// notInThisBuild lists what kiln-agent answers for a feature it lacks (a
// command whose part is not built in; the image writer refusing partition
// images); a scenario that meets one skips, naming the missing feature.
var notInThisBuild = []string{"not available in this agent build", "partition images are not supported by kiln-agent"}

// TestIronicInterop runs every scenario against one Ironic, in order, and
// logs each scenario's wall time.
func TestIronicInterop(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	for _, tool := range []string{"losetup", "sgdisk", "mkfs.ext4", "wipefs", "blkid", "debugfs", "mkfs.fat", "mmd", "mcopy", "dd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	begin := time.Now()
	var times []string
	timed := func(name string, f func(t *testing.T)) bool {
		start := time.Now()
		ran := false
		ok := t.Run(name, func(t *testing.T) { ran = true; f(t) })
		if ran { // not filtered out by -run
			times = append(times, fmt.Sprintf("%-44s %6.1f s", name, time.Since(start).Seconds()))
		}
		return ok && ran
	}
	defer func() {
		t.Logf("wall time per scenario:\n%s\n%-44s %6.1f s", strings.Join(times, "\n"), "total", time.Since(begin).Seconds())
	}()

	ir := startIronic(t)
	times = append(times, fmt.Sprintf("%-44s %6.1f s", "start ironic-api and ironic-conductor", time.Since(begin).Seconds()))

	wholeDisk := diskImage(t)
	partImage := partitionImage(t)
	dummy := filepath.Join(t.TempDir(), "deploy.bin")
	if err := os.WriteFile(dummy, []byte("PXE files go nowhere in this test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := imageServer(t, map[string]string{"disk.raw": wholeDisk, "root.img": partImage,
		"deploy.kernel": dummy, "deploy.ramdisk": dummy, "vmlinuz": dummy, "initrd": dummy})

	timed("manual clean: erase_devices_metadata", func(t *testing.T) {
		ir := ir.with(t)
		dev := loopDevice(t, loopSize)
		run(t, "dd", "if="+wholeDisk, "of="+dev, "bs=1M", "conv=fsync", "status=none")
		if sigs := wipefs(t, dev); !strings.Contains(sigs, "gpt") {
			t.Fatalf("no GPT on the disk before cleaning: %q", sigs)
		}
		m := newMachine(t, ir, srv, dev, "bios", true)
		ir.provision(m.uuid, map[string]any{"target": "clean",
			"clean_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata"}}})
		ir.mustState(m.uuid, "clean wait", time.Minute)
		ag := startAgent(t, ir, m.mac, dev)
		ir.mustState(m.uuid, "manageable", 3*time.Minute)
		ag.Stop()
		if sigs := wipefs(t, dev); sigs != "" {
			t.Fatalf("signatures left after erase_devices_metadata: %q", sigs)
		}
		mustLog(t, ag, `msg="device erased" step=erase_devices_metadata device=`+dev)
	})

	timed("manual clean: erase_devices (full erase)", func(t *testing.T) {
		ir := ir.with(t)
		dev := loopDevice(t, loopSize)
		marks := []int64{0, 100 << 20, loopSize - 1<<20}
		for _, off := range marks {
			writeRandom(t, dev, off, 1<<20)
		}
		m := newMachine(t, ir, srv, dev, "bios", true)
		ir.provision(m.uuid, map[string]any{"target": "clean",
			"clean_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices"}}})
		ir.mustState(m.uuid, "clean wait", time.Minute)
		ag := startAgent(t, ir, m.mac, dev)
		ir.mustState(m.uuid, "manageable", 5*time.Minute)
		ag.Stop()
		for _, off := range marks {
			if !isZero(t, dev, off, 1<<20) {
				t.Fatalf("the MiB at %d is not zero after erase_devices", off)
			}
		}
		mustLog(t, ag, `msg="device erased" step=erase_devices device=`+dev)
	})

	// One machine through its life: automated clean, BIOS deploy, undeploy.
	bios := &machine{}
	dev := loopDevice(t, loopSize) // the parent's: it outlives each subtest
	if timed("automated clean (provide)", func(t *testing.T) {
		ir := ir.with(t)
		run(t, "dd", "if="+wholeDisk, "of="+dev, "bs=1M", "conv=fsync", "status=none")
		*bios = *newMachine(t, ir, srv, dev, "bios", true)
		ir.provision(bios.uuid, map[string]any{"target": "provide"})
		ir.mustState(bios.uuid, "clean wait", time.Minute)
		ag := startAgent(t, ir, bios.mac, dev)
		ir.mustState(bios.uuid, "available", 5*time.Minute)
		ag.Stop()
		for _, step := range []string{"erase_devices_metadata", "erase_devices"} {
			mustLog(t, ag, `msg="device erased" step=`+step+` device=`+dev)
		}
		if sigs := wipefs(t, dev); sigs != "" {
			t.Fatalf("signatures left after automated cleaning: %q", sigs)
		}
	}) && timed("BIOS whole-disk deploy with a config drive", func(t *testing.T) {
		bios.t, bios.ir = t, ir.with(t)
		n, f := bios.deploy(srv+"/disk.raw", sha256File(t, wholeDisk), nil, true)
		if f != nil {
			t.Fatalf("deploy: %s: %s", f.state, f.lastError)
		}
		checkWholeDisk(t, dev, wholeDisk, true)
		if dii, _ := n["driver_internal_info"].(map[string]any); dii["is_whole_disk_image"] != true {
			t.Fatalf("Ironic did not take the image as whole-disk: %v", dii)
		}
	}) {
		timed("undeploy (automated clean)", func(t *testing.T) {
			ir := ir.with(t)
			ir.provision(bios.uuid, map[string]any{"target": "deleted"})
			ir.mustState(bios.uuid, "clean wait", 2*time.Minute)
			ag := startAgent(t, ir, bios.mac, dev)
			ir.mustState(bios.uuid, "available", 5*time.Minute)
			ag.Stop()
			if sigs := wipefs(t, dev); sigs != "" {
				t.Fatalf("signatures left after undeploy: %q", sigs)
			}
		})
	}

	timed("UEFI whole-disk deploy", func(t *testing.T) {
		ir := ir.with(t)
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("unshare is not installed: the agent cannot be given a test EFI variable store")
		}
		dev := loopDevice(t, loopSize)
		m := newMachine(t, ir, srv, dev, "uefi", false)
		m.firmware = t.TempDir()
		efivars := filepath.Join(m.firmware, "efi", "efivars")
		if err := os.MkdirAll(efivars, 0o755); err != nil {
			t.Fatal(err)
		}
		ir.provision(m.uuid, map[string]any{"target": "provide"})
		ir.mustState(m.uuid, "available", time.Minute)
		_, f := m.deploy(srv+"/disk.raw", sha256File(t, wholeDisk), nil, false)
		if f != nil {
			skipIfNotBuilt(t, f, "image.install_bootloader (UEFI)")
			t.Fatalf("deploy: %s: %s", f.state, f.lastError)
		}
		checkWholeDisk(t, dev, wholeDisk, false)
		checkBootEntry(t, efivars, `\EFI\DEBIAN\SHIMX64.EFI`)
	})

	timed("partition image deploy with a config drive", func(t *testing.T) {
		ir := ir.with(t)
		// root_gb is whole GiB: 1 GiB of root, the config drive and the
		// boot partitions need a bigger (sparse) disk.
		dev := loopDevice(t, 2<<30)
		m := newMachine(t, ir, srv, dev, "bios", false)
		ir.provision(m.uuid, map[string]any{"target": "provide"})
		ir.mustState(m.uuid, "available", time.Minute)
		_, f := m.deploy(srv+"/root.img", sha256File(t, partImage), map[string]any{
			"kernel": srv + "/vmlinuz", "ramdisk": srv + "/initrd", "root_gb": 1}, true)
		if f != nil {
			skipIfNotBuilt(t, f, "partition images (image_type partition) and image.install_bootloader (BIOS, the image's grub)")
			t.Fatalf("deploy: %s: %s", f.state, f.lastError)
		}
		checkPartition(t, dev, partImage)
	})
}

// skipIfNotBuilt skips when the deploy failed because kiln-agent answered
// that a command's part is not in this build.
func skipIfNotBuilt(t *testing.T, f *failedState, feature string) {
	t.Helper()
	for _, s := range notInThisBuild {
		if strings.Contains(f.lastError, s) {
			t.Skipf("needs %s in kiln-agent; Ironic reports: %s", feature, f.lastError)
		}
	}
}

// machine is one enrolled node and its port.
type machine struct {
	t    *testing.T
	ir   *ironic
	uuid string
	mac  string
	dev  string
	// firmware, when set, is the agent's /sys/firmware (see startAgent).
	firmware string
}

// newMachine enrolls a manual-management node (fake power, no-op
// management, PXE boot) whose root device is dev, and makes it manageable.
func newMachine(t *testing.T, ir *ironic, srv, dev, bootMode string, autoClean bool) *machine {
	t.Helper()
	m := &machine{t: t, ir: ir, mac: randomMAC(), dev: dev}
	n := ir.must("POST", "/v1/nodes", map[string]any{
		"driver": "manual-management", "name": "interop-" + strings.ReplaceAll(m.mac, ":", ""),
		"boot_interface": "pxe", "deploy_interface": "direct", "power_interface": "fake", "management_interface": "noop",
		"automated_clean": autoClean,
		"driver_info":     map[string]any{"deploy_kernel": srv + "/deploy.kernel", "deploy_ramdisk": srv + "/deploy.ramdisk"},
		"properties":      map[string]any{"capabilities": "boot_mode:" + bootMode, "root_device": map[string]any{"name": dev}},
	}, 201)
	m.uuid = n["uuid"].(string)
	ir.must("POST", "/v1/ports", map[string]any{"node_uuid": m.uuid, "address": m.mac}, 201)
	ir.provision(m.uuid, map[string]any{"target": "manage"})
	ir.mustState(m.uuid, "manageable", time.Minute)
	return m
}

// deploy sets instance_info for image (plus extra) and deploys, with a
// config drive if asked, running the agent while Ironic waits for it.
func (m *machine) deploy(url, sum string, extra map[string]any, configdrive bool) (map[string]any, *failedState) {
	t := m.t
	t.Helper()
	ii := map[string]any{"image_source": url, "image_checksum": sum, "image_os_hash_algo": "sha256", "image_os_hash_value": sum}
	for k, v := range extra {
		ii[k] = v
	}
	m.ir.must("PATCH", "/v1/nodes/"+m.uuid, []any{map[string]any{"op": "add", "path": "/instance_info", "value": ii}}, 200)
	req := map[string]any{"target": "active"}
	if configdrive {
		req["configdrive"] = map[string]any{"meta_data": map[string]any{"hostname": "interop"}, "user_data": "#cloud-config\n"}
	}
	m.ir.provision(m.uuid, req)
	if _, f := m.ir.waitState(m.uuid, "wait call-back", 2*time.Minute); f != nil {
		return nil, f
	}
	var fw []string
	if m.firmware != "" {
		fw = append(fw, m.firmware)
	}
	ag := startAgent(t, m.ir, m.mac, m.dev, fw...)
	n, f := m.ir.waitState(m.uuid, "active", 5*time.Minute)
	ag.Stop()
	return n, f
}

// checkWholeDisk: the image's partitions hold the image's bytes and, with a
// config drive, a config-2 partition follows them.
func checkWholeDisk(t *testing.T, dev, img string, configdrive bool) {
	t.Helper()
	want, err := disk.ReadTable(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := disk.ReadTable(dev)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range want.Partitions {
		if i >= len(got.Partitions) || got.Partitions[i].Start != p.Start || got.Partitions[i].Size != p.Size {
			t.Fatalf("partition %d: disk has %+v, image %+v", i+1, got.Partitions, p)
		}
		if a, b := sha256Range(t, dev, p.Start, p.Size), sha256Range(t, img, p.Start, p.Size); a != b {
			t.Fatalf("partition %d differs from the image's", i+1)
		}
	}
	if !configdrive {
		return
	}
	if len(got.Partitions) != len(want.Partitions)+1 {
		t.Fatalf("want the image's %d partitions and a config drive, got %+v", len(want.Partitions), got.Partitions)
	}
	cd := got.Partitions[len(got.Partitions)-1]
	out, err := exec.Command("blkid", "-p", "-o", "value", "-s", "LABEL", "--offset", strconv.FormatInt(cd.Start, 10), dev).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "config-2" {
		t.Fatalf("last partition %+v has label %q (%v), want config-2", cd, out, err)
	}
}

// checkPartition: a partition of dev holds the partition image's file
// system (same UUID, same files) and the boot loader was installed from it
// for dev in BIOS mode, as IPA does.
func checkPartition(t *testing.T, dev, img string) {
	t.Helper()
	fsUUID := strings.TrimSpace(run(t, "blkid", "-p", "-o", "value", "-s", "UUID", img))
	got, err := disk.ReadTable(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got.Partitions {
		out, _ := exec.Command("blkid", "-p", "-o", "value", "-s", "UUID", "--offset", strconv.FormatInt(p.Start, 10), dev).Output()
		if strings.TrimSpace(string(out)) != fsUUID {
			continue
		}
		fs := filepath.Join(t.TempDir(), "root.fs")
		run(t, "dd", "if="+dev, "of="+fs, "bs=1M", "iflag=skip_bytes,count_bytes",
			"skip="+strconv.FormatInt(p.Start, 10), "count="+strconv.FormatInt(fileSize(t, img), 10), "status=none")
		if osr := run(t, "debugfs", "-R", "cat /etc/os-release", fs); !strings.Contains(osr, "ID=ironicinterop") {
			t.Fatalf("partition %d: /etc/os-release is %q", p.Number, osr)
		}
		if args := run(t, "debugfs", "-R", "cat /var/log/grub-install.args", fs); !strings.Contains(args, "--target=i386-pc") || !strings.Contains(args, dev) {
			t.Fatalf("grub-install ran with %q, want --target=i386-pc for %s", args, dev)
		}
		return
	}
	t.Fatalf("no partition of %s holds the file system %s: %+v", dev, fsUUID, got.Partitions)
}

// ---------------------------------------------------------------------------
// Images and disks.

func imageServer(t *testing.T, files map[string]string) string {
	t.Helper()
	mux := http.NewServeMux()
	for name, p := range files {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, p) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// diskImage is a 24 MiB whole-disk image: GPT, a 4 MiB ESP and an ext4 root.
func diskImage(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+4M", "-t1:EF00", "-n2:0:0", "-t2:8300", "-c2:root", img)
	run(t, "mkfs.ext4", "-q", "-F", "-d", rootTree(t), "-E", "offset="+strconv.Itoa(10240*512), img, "16M")
	// The ESP, FAT with a distribution's layout: shim and grub under
	// EFI/debian, the fallback loader under EFI/BOOT.
	esp := filepath.Join(t.TempDir(), "esp.img")
	run(t, "mkfs.fat", "-C", esp, "4096")
	loader := filepath.Join(t.TempDir(), "loader.efi")
	if err := os.WriteFile(loader, []byte("MZ not really a loader\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "mmd", "-i", esp, "::/EFI", "::/EFI/debian", "::/EFI/BOOT")
	for _, dst := range []string{"::/EFI/debian/shimx64.efi", "::/EFI/debian/grubx64.efi", "::/EFI/BOOT/BOOTX64.EFI"} {
		run(t, "mcopy", "-i", esp, loader, dst)
	}
	run(t, "dd", "if="+esp, "of="+img, "bs=512", "seek=2048", "conv=notrunc", "status=none")
	return img
}

// checkBootEntry: the EFI variables hold a Boot#### entry for loader (its
// file path, upper-cased here, in UTF-16 as firmware stores it) and
// BootOrder starts with it.
func checkBootEntry(t *testing.T, efivars, loader string) {
	t.Helper()
	const globalGUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	order, err := os.ReadFile(filepath.Join(efivars, "BootOrder-"+globalGUID))
	if err != nil || len(order) < 6 {
		t.Fatalf("BootOrder: %v (%x)", err, order)
	}
	first := fmt.Sprintf("Boot%04X-%s", uint16(order[4])|uint16(order[5])<<8, globalGUID)
	entry, err := os.ReadFile(filepath.Join(efivars, first))
	if err != nil {
		t.Fatalf("BootOrder starts with %s: %v", first, err)
	}
	var path []rune
	for i := 4; i+1 < len(entry); i += 2 {
		path = append(path, rune(entry[i])|rune(entry[i+1])<<8)
	}
	if !strings.Contains(strings.ToUpper(string(path)), loader) {
		t.Fatalf("%s does not name %s: %q", first, loader, string(path))
	}
}

// grubStub stands in for the image's grub-install and grub-mkconfig (the
// agent runs them chrooted into the image): it records its arguments in
// /var/log/<name>.args and writes the file given with -o.
const grubStub = `package main

import (
	"os"
	"path/filepath"
	"strings"
)

func main() {
	name := filepath.Base(os.Args[0])
	_ = os.WriteFile("/var/log/"+name+".args", []byte(strings.Join(os.Args[1:], " ")+"\n"), 0o644)
	for i, a := range os.Args {
		if a == "-o" && i+1 < len(os.Args) {
			_ = os.MkdirAll(filepath.Dir(os.Args[i+1]), 0o755)
			_ = os.WriteFile(os.Args[i+1], []byte("# grub.cfg from the test's grub-mkconfig\n"), 0o644)
		}
	}
}
`

// partitionImage is a 16 MiB ext4 root file system with stand-ins for
// grub-install and grub-mkconfig (static, so they run in a chroot).
func partitionImage(t *testing.T) string {
	t.Helper()
	root := rootTree(t)
	src := filepath.Join(t.TempDir(), "grubstub.go")
	if err := os.WriteFile(src, []byte(grubStub), 0o644); err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(root, "usr", "sbin", "grub-install")
	ctx, cancel := testtool.WithTimeout(t.Context(), "build", testtool.BuildTimeout)
	defer cancel()
	cmd := testtool.Command(ctx, "go", "build", "-o", stub, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the grub stand-in: %v\n%s", testtool.Why(ctx, err), out)
	}
	if err := os.Link(stub, filepath.Join(root, "usr", "sbin", "grub-mkconfig")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "root.img")
	run(t, "mkfs.ext4", "-q", "-F", "-d", root, img, "16M")
	return img
}

func rootTree(t *testing.T) string {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=ironicinterop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func wipefs(t *testing.T, dev string) string {
	t.Helper()
	out, _ := exec.Command("wipefs", "-n", "-O", "TYPE", "--noheadings", dev).CombinedOutput()
	return strings.TrimSpace(string(out))
}

func writeRandom(t *testing.T, dev string, off, n int64) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func isZero(t *testing.T, dev string, off, n int64) bool {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func sha256Range(t *testing.T, path string, off, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha256File(t *testing.T, path string) string {
	return sha256Range(t, path, 0, fileSize(t, path))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func randomMAC() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	b[0] = b[0]&0xfc | 0x02
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

func mustLog(t *testing.T, ag *agentProc, s string) {
	t.Helper()
	if !strings.Contains(ag.Logs(), s) {
		t.Fatalf("agent log lacks %q", s)
	}
}
