package agente2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
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
)

const loopSize = 256 << 20

// wipefs lists the signatures wipefs finds on dev ("" when none).
func wipefs(t *testing.T, dev string) string {
	t.Helper()
	out, _ := exec.Command("wipefs", "-n", "-O", "TYPE", "--noheadings", dev).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// TestManualCleanErasesMetadata: manual cleaning with erase_devices_metadata
// run by the agent on the loop device.
func TestManualCleanErasesMetadata(t *testing.T) {
	needRoot(t, "wipefs", "sgdisk", "mkfs.ext4")
	t.Parallel()
	k := startKiln(t)
	dev := loopDevice(t, loopSize)
	img := diskImage(t)
	run(t, "dd", "if="+img, "of="+dev, "bs=1M", "conv=fsync", "status=none")
	if err := disk.RereadPartitions(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	if sigs := wipefs(t, dev); !strings.Contains(sigs, "gpt") {
		t.Fatalf("no GPT signature before cleaning: %q", sigs)
	}
	mac := randomMAC()
	uuid := k.node(mac, nil)
	k.provision(uuid, map[string]any{"target": "manage"})
	k.wait(uuid, 30*time.Second, "manageable")
	k.provision(uuid, map[string]any{"target": "clean",
		"clean_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata"}}})
	k.wait(uuid, 30*time.Second, "clean wait")
	ag := startAgent(t, k, mac, dev)
	k.wait(uuid, 60*time.Second, "manageable")
	ag.Stop()
	if sigs := wipefs(t, dev); sigs != "" {
		t.Fatalf("signatures left after erase_devices_metadata: %q", sigs)
	}
	if !strings.Contains(ag.Logs(), "device erased") {
		t.Fatalf("the agent did not erase:\n%s", ag.Logs())
	}
}

// imageServer serves files by name over HTTP (with ranges, for qcow2).
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

// deployAndCheck deploys image (served at url) with a dict config drive and
// checks the loop device and the node afterwards.
func deployAndCheck(t *testing.T, k *kiln, uuid, mac, dev, url, sum, raw string, deploySteps ...any) {
	t.Helper()
	k.must("PATCH", "/v1/nodes/"+uuid, []any{
		map[string]any{"op": "add", "path": "/instance_info", "value": map[string]any{
			"image_source": url, "image_os_hash_algo": "sha256", "image_os_hash_value": sum,
			"root_device": map[string]any{"name": dev}}},
	}, 200)
	req := map[string]any{"target": "active", "configdrive": map[string]any{
		"meta_data": map[string]any{"hostname": "e2e"}, "user_data": "#cloud-config\n"}}
	if deploySteps != nil {
		req["deploy_steps"] = deploySteps
	}
	k.provision(uuid, req)
	k.wait(uuid, 30*time.Second, "wait call-back")
	ag := startAgent(t, k, mac, dev)
	n := k.wait(uuid, 90*time.Second, "active")
	ag.Stop()

	// The image's bytes are on the disk; only the GPT differs (its backup
	// moved to the end of the bigger disk, the config-2 partition added).
	size := fileSize(t, raw)
	const primary, backup = 34 * 512, 33 * 512
	n2 := size - primary - backup
	if deploySteps != nil {
		// inject_files changed the root filesystem: compare up to it.
		n2 = 10240*512 - primary
	}
	if got, want := sha256Of(t, dev, primary, n2), sha256Of(t, raw, primary, n2); got != want {
		t.Fatalf("loop device does not hold the image: sha256 %s, image %s", got, want)
	}
	want, err := disk.ReadTable(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := disk.ReadTable(dev)
	if err != nil {
		t.Fatal(err)
	}
	if got.DiskID != want.DiskID || len(got.Partitions) != len(want.Partitions)+1 {
		t.Fatalf("partition table on the disk %+v, image's %+v", got, want)
	}
	for i, p := range want.Partitions {
		if got.Partitions[i] != p {
			t.Fatalf("partition %d is %+v on the disk, %+v in the image", i+1, got.Partitions[i], p)
		}
	}
	cd := got.Partitions[len(got.Partitions)-1]
	if cd.Name != "config-2" {
		t.Fatalf("last partition %+v is not config-2", cd)
	}
	if out := run(t, "sgdisk", "-p", dev); !strings.Contains(out, "config-2") {
		t.Fatalf("sgdisk does not show config-2:\n%s", out)
	}
	if out, err := exec.Command("blkid", "-p", "-o", "value", "-s", "LABEL", "--offset", itoa(cd.Start), dev).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "config-2" {
		t.Fatalf("config-2 partition has label %q (%v), want config-2", out, err)
	}
	dii, _ := n["driver_internal_info"].(map[string]any)
	uuids, _ := dii["kiln_partition_uuids"].(map[string]any)
	if uuids == nil || uuids["root uuid"] != want.Partitions[1].UUID || uuids["efi system partition uuid"] != want.Partitions[0].UUID {
		t.Fatalf("driver_internal_info.kiln_partition_uuids = %v, want root %s efi %s", dii["kiln_partition_uuids"], want.Partitions[1].UUID, want.Partitions[0].UUID)
	}
	if n["last_error"] != nil {
		t.Fatalf("last_error %v", n["last_error"])
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDeployRaw: enroll → manage → provide (automated cleaning by the agent:
// erase_devices_metadata, erase_devices) → deploy a raw image with a dict
// config drive → active.
func TestDeployRaw(t *testing.T) {
	needRoot(t, "sgdisk", "mkfs.ext4", "blkid")
	t.Parallel()
	k := startKiln(t)
	dev := loopDevice(t, loopSize)
	img := diskImage(t)
	url := imageServer(t, map[string]string{"disk.raw": img})
	mac := randomMAC()
	uuid := k.node(mac, nil)
	k.provision(uuid, map[string]any{"target": "manage"})
	k.wait(uuid, 30*time.Second, "manageable")

	// Old data on the disk that automated cleaning must remove.
	run(t, "dd", "if="+img, "of="+dev, "bs=1M", "conv=fsync", "status=none")
	k.provision(uuid, map[string]any{"target": "provide"})
	k.wait(uuid, 30*time.Second, "clean wait")
	ag := startAgent(t, k, mac, dev)
	k.wait(uuid, 90*time.Second, "available")
	ag.Stop()
	for _, step := range []string{"erase_devices_metadata", "erase_devices"} {
		if !strings.Contains(ag.Logs(), "msg=\"device erased\" step="+step+" device="+dev) {
			t.Errorf("automated cleaning did not run %s", step)
		}
	}
	if sigs := wipefs(t, dev); sigs != "" {
		t.Fatalf("signatures left after automated cleaning: %q", sigs)
	}
	deployAndCheck(t, k, uuid, mac, dev, url+"/disk.raw", sha256Of(t, img, 0, fileSize(t, img)), img)
}

// TestDeployQcow2: a qcow2 image made with qemu-img, automated cleaning off.
func TestDeployQcow2(t *testing.T) {
	needRoot(t, "sgdisk", "mkfs.ext4", "blkid", "qemu-img")
	t.Parallel()
	k := startKiln(t)
	dev := loopDevice(t, loopSize)
	img := diskImage(t)
	qcow := filepath.Join(t.TempDir(), "disk.qcow2")
	run(t, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", img, qcow)
	url := imageServer(t, map[string]string{"disk.qcow2": qcow})
	mac := randomMAC()
	uuid := k.node(mac, map[string]any{"automated_clean": false})
	k.provision(uuid, map[string]any{"target": "manage"})
	k.wait(uuid, 30*time.Second, "manageable")
	k.provision(uuid, map[string]any{"target": "provide"})
	k.wait(uuid, 30*time.Second, "available")
	// The user's deploy step inject_files runs after write_image (80).
	inject := map[string]any{"interface": "deploy", "step": "inject_files", "priority": 50, "args": map[string]any{
		"files": []any{map[string]any{"path": "/etc/kiln/injected", "content": base64.StdEncoding.EncodeToString([]byte("from e2e\n")), "mode": 0o600}}}}
	deployAndCheck(t, k, uuid, mac, dev, url+"/disk.qcow2", sha256Of(t, qcow, 0, fileSize(t, qcow)), img, inject)

	// The file is in the root filesystem (partition 2 at sector 10240),
	// which is the image's everywhere else.
	fs := filepath.Join(t.TempDir(), "rootfs")
	run(t, "dd", "if="+dev, "of="+fs, "bs=512", "skip=10240", "count=32768", "status=none")
	if out := run(t, "debugfs", "-R", "cat /etc/kiln/injected", fs); !strings.Contains(out, "from e2e") {
		t.Fatalf("injected file holds %q", out)
	}
	if out := run(t, "debugfs", "-R", "stat /etc/kiln/injected", fs); !strings.Contains(out, "Mode:  0600") {
		t.Fatalf("injected file mode:\n%s", out)
	}
}

// TestDeployWrongChecksum: the deploy fails naming both checksums and the
// disk's first MiB is zeroed so the half-written image cannot boot.
func TestDeployWrongChecksum(t *testing.T) {
	needRoot(t, "sgdisk", "mkfs.ext4")
	t.Parallel()
	k := startKiln(t)
	dev := loopDevice(t, loopSize)
	img := diskImage(t)
	url := imageServer(t, map[string]string{"disk.raw": img})
	junk := make([]byte, 2<<20)
	_, _ = rand.Read(junk)
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(junk); err != nil {
		t.Fatal(err)
	}
	f.Close()

	mac := randomMAC()
	uuid := k.node(mac, map[string]any{"automated_clean": false})
	k.provision(uuid, map[string]any{"target": "manage"})
	k.wait(uuid, 30*time.Second, "manageable")
	k.provision(uuid, map[string]any{"target": "provide"})
	k.wait(uuid, 30*time.Second, "available")
	wrong := strings.Repeat("ab", 32)
	k.must("PATCH", "/v1/nodes/"+uuid, []any{
		map[string]any{"op": "add", "path": "/instance_info", "value": map[string]any{
			"image_source": url + "/disk.raw", "image_os_hash_algo": "sha256", "image_os_hash_value": wrong,
			"root_device": map[string]any{"name": dev}}},
	}, 200)
	k.provision(uuid, map[string]any{"target": "active"})
	k.wait(uuid, 30*time.Second, "wait call-back")
	ag := startAgent(t, k, mac, dev)
	n := k.wait(uuid, 90*time.Second, "deploy failed")
	ag.Stop()
	lastErr, _ := n["last_error"].(string)
	t.Logf("last_error: %s", lastErr)
	right := sha256Of(t, img, 0, fileSize(t, img))
	if !strings.Contains(lastErr, wrong) || !strings.Contains(lastErr, right) {
		t.Fatalf("last_error %q does not name both checksums (expected %s, actual %s)", lastErr, wrong, right)
	}
	b := make([]byte, 1<<20)
	f, err = os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, make([]byte, 1<<20)) {
		t.Fatalf("the first MiB of %s is not zeroed after the failed deploy", dev)
	}
}

// TestCleanTouchesOnlyAllowedDevices: outside a ramdisk the agent erases the
// --allow-device disk and leaves another disk with signatures alone.
func TestCleanTouchesOnlyAllowedDevices(t *testing.T) {
	needRoot(t, "wipefs", "sgdisk", "mkfs.ext4")
	t.Parallel()
	k := startKiln(t)
	allowed, other := loopDevice(t, loopSize), loopDevice(t, loopSize)
	img := diskImage(t)
	for _, dev := range []string{allowed, other} {
		run(t, "dd", "if="+img, "of="+dev, "bs=1M", "conv=fsync", "status=none")
	}
	mac := randomMAC()
	uuid := k.node(mac, nil)
	k.provision(uuid, map[string]any{"target": "manage"})
	k.wait(uuid, 30*time.Second, "manageable")
	k.provision(uuid, map[string]any{"target": "clean",
		"clean_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata"}}})
	k.wait(uuid, 30*time.Second, "clean wait")
	ag := startAgent(t, k, mac, allowed)
	k.wait(uuid, 60*time.Second, "manageable")
	ag.Stop()
	if sigs := wipefs(t, allowed); sigs != "" {
		t.Fatalf("allowed device %s still has %q", allowed, sigs)
	}
	if sigs := wipefs(t, other); !strings.Contains(sigs, "gpt") {
		t.Fatalf("device %s, not allowed, was touched: signatures now %q", other, sigs)
	}
}
