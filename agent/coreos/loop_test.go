package coreos

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/netconf"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/internal/syspath"
	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/proto"
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testtool.Need(t, tool)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// attachLoop puts img on a loop device, detached when the test ends.
func attachLoop(t *testing.T, img string) string {
	t.Helper()
	need(t, "losetup")
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		if _, serr := os.Stat("/dev/loop-control"); serr != nil {
			t.Skipf("no loop device support: %v", serr)
		}
		t.Fatalf("losetup %s: %v: %s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

func sparseFile(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "target.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

const (
	mib        = int64(1) << 20
	testOpts   = "options ignition.platform.id=metal $ignition_firstboot ostree=/ostree/boot.1/fedora-coreos/abc/0 root=UUID=1234 rw"
	testEntry  = "title Fedora CoreOS 41 (ostree:0)\nversion 1\nlinux /ostree/fedora-coreos-abc/vmlinuz\ninitrd /ostree/fedora-coreos-abc/initramfs.img\n" + testOpts + "\n"
	firstStamp = "# kiln test: stamp shipped by the image\n"
)

// coreosImage builds a CoreOS-shaped metal image: a GPT with an EFI system
// partition, an ext4 "boot" filesystem holding a BLS entry and the
// first-boot stamp, and an ext4 "root" filesystem.
func coreosImage(t *testing.T) []byte {
	t.Helper()
	need(t, "sgdisk", "mkfs.ext4")
	dir := t.TempDir()
	boot := filepath.Join(dir, "bootfs")
	if err := os.MkdirAll(filepath.Join(boot, "loader.1/entries"), 0o755); err != nil {
		t.Fatal(err)
	}
	// As on CoreOS, loader is a symlink to the current loader.N.
	if err := os.Symlink("loader.1", filepath.Join(boot, "loader")); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(boot, "loader.1/entries/ostree-1.conf"), testEntry)
	write(filepath.Join(boot, FirstbootPath), firstStamp)
	bootImg, rootImg := filepath.Join(dir, "boot.img"), filepath.Join(dir, "root.img")
	run(t, "mkfs.ext4", "-F", "-q", "-L", "boot", "-d", boot, bootImg, "16M")
	run(t, "mkfs.ext4", "-F", "-q", "-L", "root", rootImg, "8M")

	img := filepath.Join(dir, "coreos.raw")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(30 * mib); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, "sgdisk", "-n1:2048:+4M", "-t1:ef00", "-c1:EFI-SYSTEM",
		"-n2:0:+16M", "-t2:8300", "-c2:boot", "-n3:0:+8M", "-t3:8300", "-c3:root", img)
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syspath.LookPath("mkfs.vfat"); err == nil {
		esp := filepath.Join(dir, "esp.img")
		run(t, "mkfs.vfat", "-C", "-n", "EFI-SYSTEM", esp, "4096")
		put(t, b, esp, 1*mib)
	}
	put(t, b, bootImg, 5*mib)
	put(t, b, rootImg, 21*mib)
	return b
}

func put(t *testing.T, disk []byte, file string, off int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	copy(disk[off:], b)
}

func serve(t *testing.T, body []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "img", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/fedora-coreos-metal.x86_64.raw.gz"
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// testManager is New() forced onto the native path and a network dir.
func testManager(t *testing.T, netDir string) *Manager {
	m := New()
	m.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
	m.NetworkConfigDir = netDir
	return m
}

func node(dev, url, checksum string, configdrive any) map[string]any {
	return map[string]any{
		"uuid":       "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
		"properties": map[string]any{"root_device": map[string]any{"name": dev}},
		"instance_info": map[string]any{
			"image_source": url, "image_checksum": checksum, "configdrive": configdrive,
		},
	}
}

func deployCall(dev string, n map[string]any) steps.Call {
	return steps.Call{
		Kind:   proto.StepDeploy,
		Step:   proto.StepCall{Step: proto.Step{Step: StepName, Priority: 80, Interface: "deploy"}},
		Node:   n,
		Safety: steps.Safety{Allow: []string{dev}},
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// debugfsCat reads a file of an ext4 partition with debugfs (an oracle
// independent of the kernel mount the step used).
func debugfs(t *testing.T, part, req string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", req, part).Output()
	if err != nil {
		t.Fatalf("debugfs -R %q %s: %v", req, part, err)
	}
	return string(out)
}

func bootPartNode(t *testing.T, dev string) string {
	t.Helper()
	p, err := FindBootPartition(dev)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := disk.KernelPartitions(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, kp := range parts {
		if kp.Number == p.Number {
			return "/dev/" + kp.Name
		}
	}
	t.Fatalf("no kernel partition %d on %s", p.Number, dev)
	return ""
}

func TestInstallNativeLoop(t *testing.T) {
	need(t, "debugfs")
	img := gz(t, coreosImage(t))
	url := serve(t, img)
	dev := attachLoop(t, sparseFile(t, 64*mib))

	netDir := t.TempDir()
	keyfile := "[connection]\nid=eno1\ntype=ethernet\ninterface-name=eno1\n\n[ipv4]\nmethod=manual\naddress1=192.0.2.10/24,192.0.2.1\n"
	if err := os.WriteFile(filepath.Join(netDir, "eno1.nmconnection"), []byte(keyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(netDir, "subdir"), 0o755) // not a file: not copied
	// And the keyfiles netconf generates from the host's NMState data.
	nm, err := netconf.ParseNMState([]byte("interfaces:\n- {name: eno2, type: ethernet}\n- name: eno2.42\n  type: vlan\n  vlan: {base-iface: eno2, id: 42}\n  ipv4: {address: [{ip: 198.51.100.7, prefix-length: 24}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := netconf.WriteKeyfiles(netDir, nm); err != nil {
		t.Fatal(err)
	}

	ign := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"passwd":   map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []any{"ssh-ed25519 AAAA test"}}}},
	}
	cd := map[string]any{
		"user_data": ign,
		"meta_data": map[string]any{"coreos_append_karg": []any{"console=ttyS0,115200n8", "ip=dhcp"}, "name": "node-1"},
	}
	m := testManager(t, netDir)
	var progress []proto.CommandProgress
	call := deployCall(dev, node(dev, url, sha(img), cd))
	call.Progress = func(p proto.CommandProgress) { progress = append(progress, p) }
	res, err := m.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(Result); r.Device != dev || r.Method != "native" {
		t.Errorf("result %+v", r)
	}
	if len(progress) == 0 {
		t.Error("no progress reported")
	}

	part := bootPartNode(t, dev)
	got := debugfs(t, part, "cat /"+IgnitionPath)
	want, _ := json.Marshal(ign)
	if got != string(want) {
		t.Errorf("config.ign = %q, want %q", got, want)
	}
	if st := debugfs(t, part, "stat /"+IgnitionPath); !strings.Contains(st, "Mode:  0600") {
		t.Errorf("config.ign mode:\n%s", st)
	}
	if st := debugfs(t, part, "stat /ignition"); !strings.Contains(st, "Mode:  0700") {
		t.Errorf("ignition dir mode:\n%s", st)
	}
	entry := debugfs(t, part, "cat /loader.1/entries/ostree-1.conf")
	if !strings.Contains(entry, testOpts+" console=ttyS0,115200n8 ip=dhcp\n") {
		t.Errorf("BLS entry:\n%s", entry)
	}
	if !strings.HasPrefix(entry, "title Fedora CoreOS 41") {
		t.Errorf("BLS entry lost its other lines:\n%s", entry)
	}
	if s := debugfs(t, part, "cat /"+FirstbootPath); s != firstStamp {
		t.Errorf("first-boot stamp = %q", s)
	}
	if s := debugfs(t, part, "cat /"+NetworkDir+"/eno1.nmconnection"); s != keyfile {
		t.Errorf("copied keyfile = %q", s)
	}
	if s := debugfs(t, part, "cat /"+NetworkDir+"/eno2.42.nmconnection"); !strings.Contains(s, "[vlan]\nflags=1\nid=42\nparent=eno2\n") || !strings.Contains(s, "address1=198.51.100.7/24") {
		t.Errorf("generated keyfile = %q", s)
	}
	if st := debugfs(t, part, "stat /"+NetworkDir+"/eno2.42.nmconnection"); !strings.Contains(st, "Mode:  0600") {
		t.Errorf("generated keyfile mode:\n%s", st)
	}
	if ls := debugfs(t, part, "ls -l /"+NetworkDir); strings.Contains(ls, "subdir") {
		t.Errorf("directory copied:\n%s", ls)
	}
	// The rest of the image is as served: the root filesystem is intact.
	if out := run(t, "sgdisk", "-p", dev); !strings.Contains(out, "root") || !strings.Contains(out, "EFI-SYSTEM") {
		t.Errorf("partition table:\n%s", out)
	}

	// A second install onto the same disk works (fresh image, no leftover
	// config.ign refusing the write).
	if _, err := m.Execute(context.Background(), call); err != nil {
		t.Fatalf("second install: %v", err)
	}
}

// TestInstallNativeFormats installs the image as .raw.xz and as qcow2
// (formats found from content), with coreos_copy_network false and no kargs.
func TestInstallNativeFormats(t *testing.T) {
	need(t, "debugfs")
	raw := coreosImage(t)
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "img.raw")
	os.WriteFile(rawPath, raw, 0o644)
	formats := map[string]func() ([]byte, error){
		"xz": func() ([]byte, error) {
			if _, err := syspath.LookPath("xz"); err != nil {
				return nil, err
			}
			return exec.Command("xz", "-T1", "-0", "-c", rawPath).Output()
		},
		"qcow2": func() ([]byte, error) {
			if _, err := syspath.LookPath("qemu-img"); err != nil {
				return nil, err
			}
			q := filepath.Join(dir, "img.qcow2")
			if out, err := exec.Command("qemu-img", "convert", "-O", "qcow2", rawPath, q).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%v: %s", err, out)
			}
			return os.ReadFile(q)
		},
	}
	for name, mk := range formats {
		t.Run(name, func(t *testing.T) {
			img, err := mk()
			if errors.Is(err, exec.ErrNotFound) {
				t.Skipf("no tool for %s: %v", name, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			url := serve(t, img)
			dev := attachLoop(t, sparseFile(t, 64*mib))
			netDir := t.TempDir()
			os.WriteFile(filepath.Join(netDir, "eno1.nmconnection"), []byte("[connection]\n"), 0o600)
			cd := map[string]any{
				"user_data": `{"ignition":{"version":"3.2.0"}}`,
				"meta_data": map[string]any{"coreos_copy_network": false},
			}
			if _, err := testManager(t, netDir).Execute(context.Background(), deployCall(dev, node(dev, url, sha(img), cd))); err != nil {
				t.Fatal(err)
			}
			part := bootPartNode(t, dev)
			if got := debugfs(t, part, "cat /"+IgnitionPath); got != `{"ignition":{"version":"3.2.0"}}` {
				t.Errorf("config.ign = %q", got)
			}
			if ls := debugfs(t, part, "ls /"); strings.Contains(ls, NetworkDir) {
				t.Errorf("network copied although coreos_copy_network is false:\n%s", ls)
			}
			if entry := debugfs(t, part, "cat /loader.1/entries/ostree-1.conf"); entry != testEntry {
				t.Errorf("BLS entry changed without kargs:\n%s", entry)
			}
		})
	}
}

// TestInstallInvalidIgnitionUntouched: a bad config fails the step before
// a byte is written.
func TestInstallInvalidIgnitionUntouched(t *testing.T) {
	img := []byte("never fetched")
	var fetched atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Store(true)
		w.Write(img)
	}))
	defer srv.Close()
	target := sparseFile(t, 8*mib)
	pattern := bytes.Repeat([]byte("kiln-untouched!\n"), int(mib)/16)
	f, _ := os.OpenFile(target, os.O_WRONLY, 0)
	f.WriteAt(pattern, 0)
	f.WriteAt(pattern, 7*mib)
	f.Close()
	dev := attachLoop(t, target)
	sum := func() string {
		b, err := os.ReadFile(dev)
		if err != nil {
			t.Fatal(err)
		}
		return sha(b)
	}
	before := sum()
	for name, ud := range map[string]any{
		"syntax":     "{\n  \"ignition\": {\"version\": \"3.4.0\"},\n  \"storage\": {\"files\": [}\n}",
		"version2":   map[string]any{"ignition": map[string]any{"version": "2.2.0"}},
		"relative":   map[string]any{"ignition": map[string]any{"version": "3.4.0"}, "storage": map[string]any{"files": []any{map[string]any{"path": "etc/motd"}}}},
		"no version": map[string]any{"ignition": map[string]any{}},
	} {
		cd := map[string]any{"user_data": ud}
		_, err := testManager(t, t.TempDir()).Execute(context.Background(), deployCall(dev, node(dev, srv.URL+"/x.raw", sha(img), cd)))
		if err == nil {
			t.Fatalf("%s: invalid Ignition accepted", name)
		}
		if name == "syntax" && !strings.Contains(err.Error(), "line 3, column 25") {
			t.Errorf("syntax error without its position: %v", err)
		}
		t.Logf("%s: %v", name, err)
	}
	if after := sum(); after != before {
		t.Errorf("device changed: sha256 %s → %s", before, after)
	}
	if fetched.Load() {
		t.Error("image fetched despite the invalid config")
	}
}

// TestInstallBusyDisk: a disk with a mounted filesystem is refused before
// anything is fetched or written.
func TestInstallBusyDisk(t *testing.T) {
	need(t, "mkfs.ext4")
	img := sparseFile(t, 16*mib)
	run(t, "mkfs.ext4", "-F", "-q", img)
	dev := attachLoop(t, img)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount ext4 here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	var fetched atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetched.Store(true) }))
	defer srv.Close()
	cd := map[string]any{"user_data": `{"ignition":{"version":"3.4.0"}}`}
	_, err := testManager(t, t.TempDir()).Execute(context.Background(), deployCall(dev, node(dev, srv.URL+"/i.raw", strings.Repeat("a", 64), cd)))
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("busy disk: %v", err)
	}
	if fetched.Load() {
		t.Error("image fetched for a busy disk")
	}
}
