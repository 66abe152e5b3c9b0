package hwmgr

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

func TestGrubCommands(t *testing.T) {
	for _, c := range []struct {
		name string
		t    grubTarget
		grub string
		arch string
		want [][]string
	}{
		{"bios debian", grubTarget{Device: "/dev/sda"}, "grub", "x64", [][]string{
			{"grub-install", "--target=i386-pc", "--recheck", "/dev/sda"},
			{"grub-mkconfig", "-o", "/boot/grub/grub.cfg"}}},
		{"bios rhel", grubTarget{Device: "/dev/nvme0n1"}, "grub2", "x64", [][]string{
			{"grub2-install", "--target=i386-pc", "--recheck", "/dev/nvme0n1"},
			{"grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"}}},
		{"bios software RAID: every member", grubTarget{Device: "/dev/md0", Disks: []string{"/dev/sda", "/dev/sdb"}}, "grub", "x64", [][]string{
			{"grub-install", "--target=i386-pc", "--recheck", "/dev/sda"},
			{"grub-install", "--target=i386-pc", "--recheck", "/dev/sdb"},
			{"grub-mkconfig", "-o", "/boot/grub/grub.cfg"}}},
		{"uefi x86", grubTarget{Device: "/dev/sda", UEFI: true}, "grub", "x64", [][]string{
			{"grub-install", "--target=x86_64-efi", "--efi-directory=/boot/efi", "--removable", "--no-nvram", "--recheck"},
			{"grub-mkconfig", "-o", "/boot/grub/grub.cfg"}}},
		{"uefi arm", grubTarget{Device: "/dev/sda", UEFI: true}, "grub2", "aa64", [][]string{
			{"grub2-install", "--target=arm64-efi", "--efi-directory=/boot/efi", "--removable", "--no-nvram", "--recheck"},
			{"grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"}}},
	} {
		got := grubCommands(c.t, c.grub, c.arch)
		if !slices.EqualFunc(got, c.want, slices.Equal[[]string]) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestInstallBootloaderBIOSPartitionImage runs install_bootloader for a
// partition image in BIOS mode on a loop device: the image's root is
// mounted with /dev, /proc, /run and /sys inside, the image's own
// grub2-install and grub2-mkconfig are run there (recorded here: the image
// holds no real GRUB), and everything is unmounted afterwards.
func TestInstallBootloaderBIOSPartitionImage(t *testing.T) {
	need(t, "sgdisk", "mkfs.ext4")
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 40<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+1M", "-t1:EF02", "-n2:4096:0", "-t2:8300", img)
	root := t.TempDir()
	for name, body := range map[string]string{"etc/os-release": "ID=kilntest\n", "usr/sbin/grub2-install": "#!/bin/sh\n", "boot/grub2/.keep": ""} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o755)
	}
	run(t, "mkfs.ext4", "-q", "-F", "-d", root, "-E", "offset="+strconv.Itoa(4096*512), img, "30M")
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--partscan", img))
	t.Cleanup(func() { run(t, "losetup", "-d", dev) })
	tbl, err := disk.ReadTable(dev)
	if err != nil {
		t.Fatal(err)
	}
	var ran [][]string
	var roots []string
	m := New(Options{EFIVarsDir: t.TempDir(), RunInRoot: func(_ context.Context, dir string, env, argv []string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, "etc/os-release"))
		if err != nil || string(b) != "ID=kilntest\n" {
			t.Errorf("the image's root is not mounted at %s: %q %v", dir, b, err)
		}
		for _, p := range []string{"dev/null", "proc/self/stat", "sys/class"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				t.Errorf("%s missing in the image's root: %v", p, err)
			}
		}
		if !slices.Contains(env, "GRUB_DISABLE_OS_PROBER=true") {
			t.Errorf("env %q", env)
		}
		ran = append(ran, argv)
		roots = append(roots, dir)
		return nil, nil
	}})
	m.written = writtenImage{Device: dev, Partition: true}
	p := proto.InstallBootloaderParams{RootUUID: tbl.Partitions[1].UUID, TargetBootMode: "bios"}
	if err := m.InstallBootloader(context.Background(), p, steps.Safety{Allow: []string{dev}}); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"grub2-install", "--target=i386-pc", "--recheck", dev}, {"grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"}}
	if !slices.EqualFunc(ran, want, slices.Equal[[]string]) {
		t.Fatalf("ran %q, want %q", ran, want)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), roots[0]) {
		t.Fatalf("%s is still mounted", roots[0])
	}
	if _, err := os.Stat(roots[0]); !os.IsNotExist(err) {
		t.Fatalf("mount point %s left behind: %v", roots[0], err)
	}
	// A failing grub-install fails the step, unless failures are ignored.
	m.opts.RunInRoot = func(context.Context, string, []string, []string) ([]byte, error) {
		return []byte("grub-install: error: cannot find a device for /boot"), os.ErrInvalid
	}
	err = m.InstallBootloader(context.Background(), p, steps.Safety{Allow: []string{dev}})
	if err == nil || !strings.Contains(err.Error(), "cannot find a device for /boot") {
		t.Fatalf("err = %v", err)
	}
	p.IgnoreBootloaderFailure = true
	if err := m.InstallBootloader(context.Background(), p, steps.Safety{Allow: []string{dev}}); err != nil {
		t.Fatalf("ignored failure: %v", err)
	}
}

func TestLookPathIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/sbin", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/sbin/grub-install", 0o755)
	write("bin/not-executable", 0o644)
	// An absolute link target means a path inside the image.
	if err := os.Symlink("/usr/sbin/grub-install", filepath.Join(root, "bin/grub-mkconfig")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		wantErr    bool
	}{
		{"grub-install", "/usr/sbin/grub-install", false},
		{"grub-mkconfig", "/bin/grub-mkconfig", false},
		{"/already/absolute", "/already/absolute", false},
		{"not-executable", "", true},
		{"grub2-install", "", true},
	} {
		got, err := lookPathIn(root, tc.name)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("lookPathIn(%q) = %q, %v; want %q, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
