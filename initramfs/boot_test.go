package initramfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/internal/testtool"
)

// marker is what initramfs/testinit prints first on the console.
const marker = "KILN-TESTINIT-UP"

// guestArgs are kernel arguments for a guest on a loaded host. Under TCG on
// a busy machine the kernel's check that the timer interrupt arrives can
// miss it and panic ("IO-APIC + timer doesn't work!", seen at load 40):
// no_timer_check skips that check, as scripts/vmtest.sh does. panic=-1
// reboots on a panic, which -no-reboot turns into QEMU's exit, so a panic
// fails the boot at once instead of after the boot timeout.
const guestArgs = "no_timer_check panic=-1"

// TestBootQEMU builds the kernel and an initramfs with the stand-in init,
// boots it in QEMU (TCG) directly with -kernel/-initrd, then by iPXE network
// boot (SeaBIOS and OVMF) through controller/boot's handlers, and checks the init came up,
// loaded its modules, got a DHCP lease and reached this test's HTTP server.
func TestBootQEMU(t *testing.T) {
	for _, tool := range []string{"qemu-system-x86_64", "apt-get", "dpkg-deb", "depmod", "modprobe", "zstd"} {
		testtool.Need(t, tool)
	}
	if _, err := os.Stat("/usr/lib/ipxe/qemu/pxe-virtio.rom"); err != nil {
		t.Skipf("QEMU's iPXE ROMs (Debian ipxe-qemu) not installed: %v", err)
	}
	ctx := t.Context()

	files := t.TempDir()
	kernel, initrd := buildImages(ctx, t, files)

	srv := newLabServer(t, files)
	base := "http://10.0.2.2:" + srv.port // QEMU user networking's alias for the host's 127.0.0.1

	t.Run("direct", func(t *testing.T) {
		out := runQEMU(ctx, t, []string{
			"-kernel", kernel, "-initrd", initrd,
			"-append", "console=ttyS0 quiet " + guestArgs + " kiln.poweroff kiln.testurl=" + base + "/hello?via=direct",
			"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
		})
		out.mustSee(t, marker, "FETCH 200 hello from the test server", "TESTINIT DONE")
		out.mustNotSee(t, "TESTINIT FAILED", "Kernel panic")
		out.modulesLoaded(t)
		srv.mustHaveHello(t, "via=direct")
	})

	t.Run("ipxe", func(t *testing.T) {
		const mac = "52:54:00:4b:69:6c"
		out := runQEMU(ctx, t, []string{
			"-boot", "n",
			"-netdev", "user,id=n0,bootfile=" + base + "/boot/boot.ipxe",
			"-device", "virtio-net-pci,netdev=n0,mac=" + mac,
		})
		out.mustSee(t, marker, "ARGS BOOTIF=01-52-54-00-4b-69-6c ipa-api-url="+base,
			"DHCP eth0 10.0.2.15/24", "FETCH 200 hello from the test server", "TESTINIT DONE")
		out.mustNotSee(t, "TESTINIT FAILED", "Kernel panic")
		srv.mustHaveHello(t, "via=ipxe")
		if got := srv.asked(); !contains(got, mac) {
			t.Errorf("backend asked for %q, want %s", got, mac)
		}
	})

	// UEFI: OVMF runs iPXE's EFI driver from the NIC ROM; the 2019 iPXE
	// hands the EFI stub the ramdisk only by name (initrd=ramdisk).
	t.Run("ipxe-uefi", func(t *testing.T) {
		const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
		varsCopy := filepath.Join(t.TempDir(), "vars.fd")
		b, err := os.ReadFile(vars)
		if errors.Is(err, os.ErrNotExist) {
			t.Skipf("OVMF (Debian ovmf) not installed: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(varsCopy, b, 0o644); err != nil {
			t.Fatal(err)
		}
		const mac = "52:54:00:4b:69:6d"
		out := runQEMU(ctx, t, []string{
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
			"-drive", "if=pflash,format=raw,unit=1,file=" + varsCopy,
			// Without this OVMF waits about a minute for DHCPv6.
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n",
			"-netdev", "user,id=n0,bootfile=" + base + "/boot/boot.ipxe",
			"-device", "virtio-net-pci,netdev=n0,bootindex=1,mac=" + mac,
		})
		out.mustSee(t, marker, "ARGS BOOTIF=01-52-54-00-4b-69-6d ipa-api-url="+base,
			"FETCH 200 hello from the test server", "TESTINIT DONE")
		out.mustNotSee(t, "TESTINIT FAILED", "Kernel panic")
		if got := srv.asked(); !contains(got, mac) {
			t.Errorf("backend asked for %q, want %s", got, mac)
		}
	})
}

// The build (fetching the kernel, compiling u-root and the init) and each
// QEMU boot have their own time limits, so that a slow build on a loaded
// machine cannot use up the boots' time, and a failure says which ran out.
// They are safety nets, generous for a loaded 2-core machine (the build alone
// took 2.5 minutes there, 7 at load 35-40, where a UEFI boot took 2m49s to
// reach init, and 19 at load 45-55 with three such builds at once, where the
// direct boot ran over 6 minutes), not measurements. The Makefile's
// TEST_TIMEOUT must stay above their sum.
const (
	buildTimeout = 30 * time.Minute
	bootTimeout  = 12 * time.Minute
)

var (
	errBuildTimeout = fmt.Errorf("the build timeout (%v) ran out", buildTimeout)
	errBootTimeout  = fmt.Errorf("the boot timeout (%v) ran out: qemu did not power off", bootTimeout)
)

// buildImages runs the real build (scripts/fetch-kernel.sh, build.sh) into
// dir, under buildTimeout. The initramfs comes from the cache when one was
// built from the same inputs before (see cachedInitramfs).
func buildImages(ctx context.Context, t *testing.T, dir string) (kernel, initrd string) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(ctx, buildTimeout, errBuildTimeout)
	defer cancel()
	kdir := filepath.Join(dir, "kernel")
	start := time.Now()
	run(ctx, t, "..", nil, "scripts/fetch-kernel.sh", kdir)
	t.Logf("fetch-kernel.sh: %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	built := cachedInitramfs(ctx, t, kdir)
	kernel = filepath.Join(dir, "kiln-agent.kernel")
	if err := os.Rename(filepath.Join(kdir, "vmlinuz"), kernel); err != nil {
		t.Fatal(err)
	}
	initrd = filepath.Join(dir, "kiln-agent.initramfs")
	copyFile(t, built, initrd)
	ks, _ := os.Stat(kernel)
	is, _ := os.Stat(initrd)
	t.Logf("initramfs: %v; kernel %d bytes, initramfs %d bytes (zstd -3)", time.Since(start).Round(time.Millisecond), ks.Size(), is.Size())
	return kernel, initrd
}

// testZstdLevel is a fast zstd level: the test measures boots, not the
// release image's size.
const testZstdLevel = "ZSTD_LEVEL=3"

// cachedInitramfs returns the test initramfs (u-root with initramfs/testinit)
// for the kernel in kdir. It is kept in $KILN_CACHE/test-initramfs (default
// ~/.cache/kiln), named by initramfs/inputs.sh's hash of everything it is
// built from, as `make initramfs` decides whether to rebuild: build.sh runs
// (minutes, up to 19 on a loaded machine) only when an input changed.
// build.sh writes a temporary file and renames it, so a concurrent run
// never reads a half-written image. Entries unused for 14 days are removed.
// Without a cache directory, or with KILN_IMAGE_CACHE=0, it builds into kdir.
func cachedInitramfs(ctx context.Context, t *testing.T, kdir string) string {
	t.Helper()
	cache := cacheDir()
	if cache == "" || os.Getenv("KILN_IMAGE_CACHE") == "0" {
		out := filepath.Join(kdir, "testinit.initramfs")
		run(ctx, t, "..", []string{testZstdLevel}, "initramfs/build.sh", kdir, "./initramfs/testinit", out)
		return out
	}
	cmd := testtool.Command(ctx, "initramfs/inputs.sh", "./initramfs/testinit", kdir)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), testZstdLevel)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	key, err := cmd.Output()
	if err != nil {
		t.Fatalf("initramfs/inputs.sh: %v\n%s", testtool.Why(ctx, err), stderr.String())
	}
	dir := filepath.Join(cache, "test-initramfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, strings.TrimSpace(string(key))+".initramfs")
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		_ = os.Chtimes(path, now, now) // in use: not one to remove
		t.Logf("initramfs from the cache (inputs unchanged): %s", path)
		return path
	}
	run(ctx, t, "..", []string{testZstdLevel}, "initramfs/build.sh", kdir, "./initramfs/testinit", path)
	removeUnused(t, dir, path)
	return path
}

// cacheDir is $KILN_CACHE, else the user's cache directory's kiln, as
// scripts/fetch-kernel.sh has it; "" when there is none.
func cacheDir() string {
	if d := os.Getenv("KILN_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "kiln")
}

// removeUnused removes the files in dir, but keep, not used for 14 days:
// older images, and temporaries of builds that were killed.
func removeUnused(t *testing.T, dir, keep string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Logf("cache: %v", err)
		return
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		info, err := de.Info()
		if err != nil || p == keep || time.Since(info.ModTime()) < 14*24*time.Hour {
			continue
		}
		if err := os.Remove(p); err == nil {
			t.Logf("cache: removed %s, unused since %v", p, info.ModTime().Format(time.DateOnly))
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := testtool.Command(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	if cause := context.Cause(ctx); cause != nil {
		t.Fatalf("%s %s: %v after %v\n%s", name, strings.Join(args, " "), cause, time.Since(start).Round(time.Second), out)
	}
	testtool.SkipUnavailable(t, name, err, out)
	t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
}

// labServer plays the controller: boot scripts and files from
// controller/boot, and an endpoint the init fetches.
type labServer struct {
	port string
	mu   sync.Mutex
	hits []string
	macs []string
}

func newLabServer(t *testing.T, dir string) *labServer {
	s := &labServer{}
	mux := http.NewServeMux()
	httpSrv := httptest.NewServer(mux)
	t.Cleanup(httpSrv.Close)
	s.port = httpSrv.URL[strings.LastIndex(httpSrv.URL, ":")+1:]
	base := "http://10.0.2.2:" + s.port
	fs, err := boot.NewFileServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	scripts := boot.NewScriptHandler(boot.Config{
		APIURL:          base,
		KernelURL:       base + "/boot/files/kiln-agent.kernel",
		RamdiskURL:      base + "/boot/files/kiln-agent.initramfs",
		Console:         "ttyS0",
		ExtraKernelArgs: append(strings.Fields(guestArgs), "quiet", "kiln.poweroff", "kiln.testurl="+base+"/hello?via=ipxe"),
	}, s)
	mux.Handle("GET /boot/boot.ipxe", scripts)
	mux.Handle("/boot/files/", http.StripPrefix("/boot/files", fs))
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.URL.RawQuery)
		s.mu.Unlock()
		fmt.Fprintln(w, "hello from the test server")
	})
	return s
}

// BootFor implements boot.Backend: every MAC boots the agent.
func (s *labServer) BootFor(_ context.Context, mac string) (boot.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.macs = append(s.macs, mac)
	return boot.Decision{Action: boot.BootAgent, NodeUUID: "test-node"}, nil
}

func (s *labServer) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.macs...)
}

func (s *labServer) mustHaveHello(t *testing.T, query string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !contains(s.hits, query) {
		t.Errorf("test server got /hello with %q, want one with %q", s.hits, query)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// console is a VM's serial output with the time each line arrived.
type console struct {
	lines []string
	at    []time.Duration
}

func (c *console) find(s string) (time.Duration, bool) {
	for i, l := range c.lines {
		if strings.Contains(l, s) {
			return c.at[i], true
		}
	}
	return 0, false
}

func (c *console) mustSee(t *testing.T, wants ...string) {
	t.Helper()
	for _, w := range wants {
		at, ok := c.find(w)
		if !ok {
			t.Errorf("console never showed %q", w)
			continue
		}
		t.Logf("%-40q at %v", w, at.Round(10*time.Millisecond))
	}
	if t.Failed() {
		t.Logf("console:\n%s", strings.Join(c.lines, "\n"))
	}
}

// modulesLoaded checks modload's summary line: every module it picked
// loaded (or, like efivarfs under BIOS, said it had nothing to drive), so
// the order put dependencies first; and it left out the server NIC drivers
// this guest has no device for (a virtio NIC, so DHCP proves virtio_net
// was picked).
func (c *console) modulesLoaded(t *testing.T) {
	t.Helper()
	skipped := false
	for _, l := range c.lines {
		if strings.Contains(l, `msg="kernel modules skipped: no matching device"`) {
			skipped = strings.Contains(l, "mlx5_core.ko") && strings.Contains(l, "i40e.ko") && !strings.Contains(l, "virtio")
			if !skipped {
				t.Errorf("modules skipped on a q35 guest: %s", l)
			}
		}
		if strings.Contains(l, `msg="kernel modules loaded"`) {
			if !strings.Contains(l, " failed=0") {
				t.Errorf("some modules failed to load: %s\n%s", l, strings.Join(c.lines, "\n"))
			}
			if !skipped {
				t.Errorf("no modules skipped: modload did not select by PCI device\n%s", strings.Join(c.lines, "\n"))
			}
			return
		}
	}
	t.Errorf("no module load summary on the console")
}

func (c *console) mustNotSee(t *testing.T, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if _, ok := c.find(b); ok {
			t.Errorf("console showed %q:\n%s", b, strings.Join(c.lines, "\n"))
		}
	}
}

// runQEMU boots a q35 TCG VM (the settings qemu-lab.md measured fastest) with
// -no-reboot, so the init's power-off ends it, and returns its console.
func runQEMU(ctx context.Context, t *testing.T, args []string) *console {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(ctx, bootTimeout, errBootTimeout)
	defer cancel()
	argv := append([]string{
		"-machine", "q35", "-cpu", "max", "-smp", "2", "-m", "512",
		"-nographic", "-monitor", "none", "-no-reboot",
	}, args...)
	cmd := testtool.Command(ctx, "qemu-system-x86_64", argv...)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	done := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); done <- err }()
	c := &console{}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		c.lines = append(c.lines, strings.TrimRight(sc.Text(), "\r"))
		c.at = append(c.at, time.Since(start))
	}
	if err := <-done; err != nil {
		if cause := context.Cause(ctx); cause != nil {
			t.Errorf("qemu: %v (ran %v)", cause, time.Since(start).Round(time.Second))
		} else {
			t.Errorf("qemu: %v", err)
		}
	}
	t.Logf("qemu ran %v", time.Since(start).Round(10*time.Millisecond))
	return c
}
