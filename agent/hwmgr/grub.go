package hwmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kilnhq/kiln/agent/disk"
	"golang.org/x/sys/unix"
)

// grubTarget is where the image's GRUB is installed.
type grubTarget struct {
	Device   string // the whole disk
	RootUUID string // PARTUUID (or filesystem UUID) of the image's root partition
	ESPUUID  string // PARTUUID of its ESP, UEFI only
	UEFI     bool
	// Disks, when set, are the disks BIOS GRUB goes on instead of Device:
	// the members of the software RAID array Device is.
	Disks []string
}

// grubEnv is the environment of the commands run inside the image:
// os-prober would probe every disk of the machine and add their systems.
var grubEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GRUB_DISABLE_OS_PROBER=true", "LC_ALL=C"}

// grubCommands are the commands IPA runs in the image's root to install
// its own GRUB: grub-install for the disk (BIOS) or onto the ESP mounted
// at /boot/efi (UEFI; the removable path, and no NVRAM access from inside
// the image: the boot entry is written by the agent afterwards), then
// grub-mkconfig. grub is "grub2" or "grub", as the image names its tools.
func grubCommands(t grubTarget, grub, arch string) [][]string {
	var cmds [][]string
	if t.UEFI {
		target := map[string]string{"x64": "x86_64-efi", "aa64": "arm64-efi", "ia32": "i386-efi", "riscv64": "riscv64-efi"}[arch]
		cmds = append(cmds, []string{grub + "-install", "--target=" + target, "--efi-directory=/boot/efi",
			"--removable", "--no-nvram", "--recheck"})
	} else {
		disks := t.Disks
		if len(disks) == 0 {
			disks = []string{t.Device}
		}
		for _, d := range disks {
			cmds = append(cmds, []string{grub + "-install", "--target=i386-pc", "--recheck", d})
		}
	}
	return append(cmds, []string{grub + "-mkconfig", "-o", "/boot/" + grub + "/grub.cfg"})
}

// grubName tells whether the image calls its tools grub2-* (Red Hat, SUSE)
// or grub-* (Debian, Ubuntu).
func grubName(root string) (string, error) {
	for _, name := range []string{"grub2", "grub"} {
		for _, dir := range []string{"usr/sbin", "usr/bin", "sbin", "bin"} {
			if _, err := os.Stat(filepath.Join(root, dir, name+"-install")); err == nil {
				return name, nil
			}
		}
	}
	return "", errors.New("the image has neither grub2-install nor grub-install")
}

// runInRoot runs argv with root as its root directory. argv[0] is looked up
// in the image's own directories (those of grubEnv's PATH), never on the
// agent's PATH: the ramdisk has no grub, and the command runs after chroot.
func runInRoot(ctx context.Context, root string, env, argv []string) ([]byte, error) {
	name, err := lookPathIn(root, argv[0])
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, name, argv[1:]...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	return cmd.CombinedOutput()
}

// lookPathIn finds an executable named name in the image mounted at root,
// in the directories of grubEnv's PATH, and returns its path inside root.
func lookPathIn(root, name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		inImage := filepath.Join(dir, name)
		// Lstat: a link's absolute target names a path inside the image,
		// which the kernel resolves after chroot, not here.
		fi, err := os.Lstat(filepath.Join(root, inImage))
		if err == nil && (fi.Mode()&os.ModeSymlink != 0 || fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0) {
			return inImage, nil
		}
	}
	return "", fmt.Errorf("the image has no executable %s in /usr/sbin, /usr/bin, /sbin or /bin", name)
}

// installGrub mounts the image's root (and ESP) with /dev, /proc, /run and
// /sys bound inside, runs grubCommands there, and unmounts everything; for
// UEFI it then registers the loader grub-install put on the ESP.
func (m *Manager) installGrub(ctx context.Context, t grubTarget) (err error) {
	if err := disk.RereadPartitions(ctx, t.Device); err != nil {
		return fmt.Errorf("install GRUB on %s: %w", t.Device, err)
	}
	rootPart, err := partitionNode(t.Device, t.RootUUID)
	if err != nil {
		return fmt.Errorf("install GRUB on %s: %w", t.Device, err)
	}
	dir, err := os.MkdirTemp("", "kiln-root-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	var mounted []string
	defer func() {
		for i := len(mounted) - 1; i >= 0; i-- {
			if uerr := unix.Unmount(mounted[i], 0); uerr != nil {
				// Never leave the image mounted: detach what is busy.
				if derr := unix.Unmount(mounted[i], unix.MNT_DETACH); derr != nil {
					err = errors.Join(err, fmt.Errorf("unmount %s: %w", mounted[i], uerr))
				}
			}
		}
	}()
	fstype, err := mountAny(rootPart, dir)
	if err != nil {
		return fmt.Errorf("install GRUB: mount the root partition %s: %w", rootPart, err)
	}
	mounted = append(mounted, dir)
	for _, b := range []string{"/dev", "/proc", "/run", "/sys"} {
		target := filepath.Join(dir, b)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("install GRUB: %w", err)
		}
		if err := unix.Mount(b, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("install GRUB: bind %s into the image: %w", b, err)
		}
		mounted = append(mounted, target)
		if err := unix.Mount("", target, "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("install GRUB: make %s a slave mount: %w", target, err)
		}
	}
	if t.UEFI {
		esp, err := partitionNode(t.Device, t.ESPUUID)
		if err != nil {
			return fmt.Errorf("install GRUB for UEFI: the ESP: %w", err)
		}
		target := filepath.Join(dir, "boot/efi")
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("install GRUB: %w", err)
		}
		if err := unix.Mount(esp, target, "vfat", 0, ""); err != nil {
			return fmt.Errorf("install GRUB: mount the ESP %s: %w", esp, err)
		}
		mounted = append(mounted, target)
	}
	grub, err := grubName(dir)
	if err != nil {
		return fmt.Errorf("install GRUB from the image on %s: %w", rootPart, err)
	}
	run := m.opts.RunInRoot
	if run == nil {
		run = runInRoot
	}
	for _, argv := range grubCommands(t, grub, efiArch()) {
		m.log.Info("running in the image", "root", rootPart, "fstype", fstype, "command", strings.Join(argv, " "))
		if out, err := run(ctx, dir, grubEnv, argv); err != nil {
			return fmt.Errorf("install GRUB: %s in the image on %s: %w: %s", strings.Join(argv, " "), rootPart, err, strings.TrimSpace(string(out)))
		}
	}
	if t.UEFI {
		return m.registerUEFILoader(t.Device, t.ESPUUID)
	}
	return nil
}

// partitionNode returns the kernel's device node of the partition of dev
// whose PARTUUID, or whose filesystem's UUID, is uuid (IPA reports a
// partition image's root by its filesystem UUID).
func partitionNode(dev, uuid string) (string, error) {
	if uuid == "" {
		return "", errors.New("no partition UUID given")
	}
	t, err := disk.ReadTable(dev)
	if err != nil {
		return "", err
	}
	kparts, err := disk.KernelPartitions(dev)
	if err != nil {
		return "", err
	}
	nodes := map[int]string{}
	for _, p := range kparts {
		nodes[p.Number] = "/dev/" + p.Name
	}
	for _, p := range t.Partitions {
		if strings.EqualFold(p.UUID, uuid) {
			if n, ok := nodes[p.Number]; ok {
				return n, nil
			}
			return "", fmt.Errorf("the kernel has no partition %d of %s", p.Number, dev)
		}
	}
	for _, p := range t.Partitions {
		n, ok := nodes[p.Number]
		if !ok {
			continue
		}
		if f, err := os.Open(n); err == nil {
			fsUUID, ok := disk.FilesystemUUID(f)
			f.Close()
			if ok && strings.EqualFold(fsUUID, uuid) {
				return n, nil
			}
		}
	}
	return "", fmt.Errorf("no partition with UUID %s on %s", uuid, dev)
}

// mountAny mounts a Linux root filesystem of any usual type.
func mountAny(src, dir string) (string, error) {
	var errs []error
	for _, fstype := range []string{"ext4", "xfs", "btrfs", "ext3", "ext2"} {
		err := unix.Mount(src, dir, fstype, 0, "")
		if err == nil {
			return fstype, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", fstype, err))
	}
	return "", errors.Join(errs...)
}
