package hwmgr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/proto"
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices")
	}
	for _, tool := range tools {
		testtool.Need(t, tool)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// loopDevice attaches a sparse file of size bytes with partition scanning.
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	need(t, "losetup")
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

// diskImage builds a 24 MiB whole-disk image: GPT, a 4 MiB ESP and an ext4
// root partition holding /etc.
func diskImage(t *testing.T) string {
	t.Helper()
	need(t, "sgdisk", "mkfs.ext4")
	img := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+4M", "-t1:EF00", "-n2:0:0", "-t2:8300", "-c2:root", img)
	root := filepath.Join(t.TempDir(), "root")
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=kilntest\n"), 0o644)
	// Partition 2 starts at sector 2048+8192.
	run(t, "mkfs.ext4", "-q", "-F", "-d", root, "-E", "offset="+strconv.Itoa(10240*512), img, "16M")
	return img
}

func sha256File(t *testing.T, path string, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	r := io.Reader(f)
	if n > 0 {
		r = io.LimitReader(f, n)
	}
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func serve(t *testing.T, files map[string]string) string {
	t.Helper()
	mux := http.NewServeMux()
	for name, path := range files {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, path) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeReq(url, sum, dev string, cd json.RawMessage) steps.ImageRequest {
	return steps.ImageRequest{
		Info: proto.ImageInfo{ID: "image", URLs: []string{url}, OSHashAlgo: "sha256", OSHashValue: sum,
			RootDevice: map[string]any{"name": dev}},
		Configdrive: cd,
		Safety:      steps.Safety{Allow: []string{dev}},
	}
}

func TestWriteImageOnLoop(t *testing.T) {
	need(t, "qemu-img", "blkid", "sgdisk")
	img := diskImage(t)
	qcow := filepath.Join(t.TempDir(), "image.qcow2")
	run(t, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", img, qcow)
	base := serve(t, map[string]string{"image.raw": img, "image.qcow2": qcow})
	cd, _ := json.Marshal(base64.StdEncoding.EncodeToString(gz(append([]byte("CD001"), make([]byte, 64<<10)...))))
	m := New(Options{ImageRetries: -1})
	for _, c := range []struct{ name, file string }{{"raw", img}, {"qcow2", qcow}} {
		t.Run(c.name, func(t *testing.T) {
			dev := loopDevice(t, 128<<20)
			var progress []proto.CommandProgress
			req := writeReq(base+"/"+filepath.Base(c.file), sha256File(t, c.file, 0), dev, cd)
			req.Progress = func(p proto.CommandProgress) { progress = append(progress, p) }
			res, err := m.WriteImage(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Device != dev || res.PartitionUUIDs.RootUUID == "" || res.PartitionUUIDs.EFISystemPartUUID == "" {
				t.Fatalf("result %+v", res)
			}
			// Everything but the GPT (rewritten for the bigger disk and the
			// config-2 partition) must be the image's bytes.
			if got, want := hashRange(t, dev, gptBytes, 24<<20-gptBytes-backupGPTBytes), hashRange(t, img, gptBytes, 24<<20-gptBytes-backupGPTBytes); got != want {
				t.Fatalf("device's bytes differ from the image's: %s vs %s", got, want)
			}
			samePartitions(t, img, dev)
			out := run(t, "sgdisk", "-p", dev)
			if !strings.Contains(out, "config-2") {
				t.Fatalf("no config-2 partition:\n%s", out)
			}
			if len(progress) == 0 || progress[0].Stage != "write_image" {
				t.Fatalf("progress %+v", progress)
			}
			root := strings.TrimSpace(run(t, "blkid", "-s", "PARTUUID", "-o", "value", dev+"p2"))
			if root != res.PartitionUUIDs.RootUUID {
				t.Fatalf("root uuid %s, blkid says %s", res.PartitionUUIDs.RootUUID, root)
			}
		})
	}
	t.Run("checksum mismatch", func(t *testing.T) {
		dev := loopDevice(t, 64<<20)
		f, _ := os.OpenFile(dev, os.O_WRONLY, 0)
		f.Write(bytes.Repeat([]byte{0xAB}, 2<<20))
		f.Close()
		wrong := strings.Repeat("0", 64)
		_, err := m.WriteImage(context.Background(), writeReq(base+"/image.raw", wrong, dev, nil))
		if err == nil || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), sha256File(t, img, 0)) {
			t.Fatalf("err = %v, want both checksums", err)
		}
		if got := sha256File(t, dev, 1<<20); got != hex.EncodeToString(sha(make([]byte, 1<<20))) {
			t.Fatalf("first MiB not zeroed")
		}
	})
	t.Run("device not allowed", func(t *testing.T) {
		dev := loopDevice(t, 64<<20)
		req := writeReq(base+"/image.raw", sha256File(t, img, 0), dev, nil)
		req.Safety = steps.Safety{Allow: []string{"/dev/loop-none"}}
		_, err := m.WriteImage(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "not running in a ramdisk") {
			t.Fatalf("err = %v", err)
		}
	})
}

// The primary GPT (protective MBR, header, 128 entries) and the backup
// (entries and header) of a 512-byte-sector disk.
const (
	gptBytes       = 34 * 512
	backupGPTBytes = 33 * 512
)

func hashRange(t *testing.T, path string, off, n int64) string {
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

// samePartitions checks the image's partitions are on the device unchanged.
func samePartitions(t *testing.T, img, dev string) {
	t.Helper()
	want, err := disk.ReadTable(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := disk.ReadTable(dev)
	if err != nil {
		t.Fatal(err)
	}
	if got.DiskID != want.DiskID {
		t.Fatalf("disk id %s, image's %s", got.DiskID, want.DiskID)
	}
	for i, p := range want.Partitions {
		if i >= len(got.Partitions) || got.Partitions[i] != p {
			t.Fatalf("partition %d: device %+v, image %+v", i+1, got.Partitions, want.Partitions)
		}
	}
}

func sha(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func TestInjectFilesOnLoop(t *testing.T) {
	need(t, "debugfs")
	img := diskImage(t)
	dev := loopDevice(t, 64<<20)
	run(t, "dd", "if="+img, "of="+dev, "bs=1M", "conv=fsync", "status=none")
	m := New(Options{})
	s := steps.Safety{Allow: []string{dev}}
	mode, dirmode := 0o600, 0o700
	files := []InjectFile{
		{Path: "/etc/kiln/hello.conf", Content: base64.StdEncoding.EncodeToString([]byte("hi\n")), Mode: &mode, DirMode: &dirmode},
		{Path: "/etc/os-release", Deleted: true},
		{Path: "/marker", Partition: "2", Content: base64.StdEncoding.EncodeToString([]byte("m"))},
	}
	if err := m.InjectFiles(context.Background(), dev, files, s); err != nil {
		t.Fatal(err)
	}
	part := dev + "p2"
	cat := func(p string) string {
		return run(t, "debugfs", "-R", "cat "+p, part)
	}
	if got := cat("/etc/kiln/hello.conf"); !strings.Contains(got, "hi") {
		t.Fatalf("hello.conf = %q", got)
	}
	stat := run(t, "debugfs", "-R", "stat /etc/kiln/hello.conf", part)
	if !strings.Contains(stat, "Mode:  0600") {
		t.Fatalf("mode:\n%s", stat)
	}
	if st := run(t, "debugfs", "-R", "stat /etc/kiln", part); !strings.Contains(st, "Mode:  0700") {
		t.Fatalf("dirmode:\n%s", st)
	}
	if out, _ := exec.Command("debugfs", "-R", "stat /etc/os-release", part).CombinedOutput(); !strings.Contains(string(out), "not found") {
		t.Fatalf("os-release not deleted:\n%s", out)
	}
	if got := cat("/marker"); !strings.Contains(got, "m") {
		t.Fatalf("marker = %q", got)
	}
	// A directory no partition has, and a partition of another device.
	if err := m.InjectFiles(context.Background(), dev, []InjectFile{{Path: "/nowhere/x", Content: "eA=="}}, s); err == nil || !strings.Contains(err.Error(), "no partition") {
		t.Fatalf("err = %v", err)
	}
	if err := m.InjectFiles(context.Background(), dev, []InjectFile{{Path: "/x", Partition: "/dev/sda1", Content: "eA=="}}, s); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("err = %v", err)
	}
}

func TestEraseMetadataOnLoop(t *testing.T) {
	need(t, "wipefs")
	img := diskImage(t)
	dev := loopDevice(t, 64<<20)
	run(t, "dd", "if="+img, "of="+dev, "bs=1M", "conv=fsync", "status=none")
	if err := disk.RereadPartitions(context.Background(), dev); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "wipefs", "-n", dev); !strings.Contains(out, "gpt") {
		t.Fatalf("no signature before:\n%s", out)
	}
	m := New(Options{})
	res, err := m.Erase(context.Background(), StepEraseMetadata, steps.Node{}, steps.Safety{Allow: []string{dev}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Device != dev {
		t.Fatalf("result %+v", res)
	}
	if out, _ := exec.Command("wipefs", "-n", dev).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("signatures left:\n%s", out)
	}
}
