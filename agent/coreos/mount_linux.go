package coreos

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
	"golang.org/x/sys/unix"
)

// BootLabel is the filesystem label (and GPT name) of CoreOS's /boot.
const BootLabel = "boot"

// FindBootPartition returns the partition of dev whose ext2/3/4 filesystem
// is labelled "boot" — what coreos-installer looks up by LABEL — or, when no
// filesystem carries the label, the one whose GPT name is "boot".
func FindBootPartition(dev string) (disk.Partition, error) {
	t, err := disk.ReadTable(dev)
	if err != nil {
		return disk.Partition{}, fmt.Errorf("find boot partition on %s: %w", dev, err)
	}
	f, err := os.Open(dev)
	if err != nil {
		return disk.Partition{}, fmt.Errorf("find boot partition on %s: %w", dev, err)
	}
	defer f.Close()
	var byName *disk.Partition
	for i, p := range t.Partitions {
		if label, ok := extLabel(f, p.Start); ok && label == BootLabel {
			return p, nil
		}
		if p.Name == BootLabel && byName == nil {
			byName = &t.Partitions[i]
		}
	}
	if byName != nil {
		return *byName, nil
	}
	return disk.Partition{}, fmt.Errorf("find boot partition on %s: no partition labelled %q among %d", dev, BootLabel, len(t.Partitions))
}

// extLabel reads the volume name of an ext2/3/4 superblock at off+1024.
func extLabel(f *os.File, off int64) (string, bool) {
	sb := make([]byte, 136)
	if _, err := f.ReadAt(sb, off+1024); err != nil {
		return "", false
	}
	if binary.LittleEndian.Uint16(sb[56:58]) != 0xEF53 {
		return "", false
	}
	name := sb[120:136]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return string(name), true
}

// partitionNode returns a device node for partition number n of dev after
// making the kernel's partitions match the table. devtmpfs creates
// /dev/<name> itself; when /dev is not devtmpfs, a node is made in tmp.
func partitionNode(ctx context.Context, dev string, n int, tmp string) (string, error) {
	if err := disk.RereadPartitions(ctx, dev); err != nil {
		return "", err
	}
	parts, err := disk.KernelPartitions(dev)
	if err != nil {
		return "", err
	}
	for _, p := range parts {
		if p.Number != n {
			continue
		}
		node := filepath.Join("/dev", p.Name)
		if st, err := os.Stat(node); err == nil && st.Mode()&os.ModeDevice != 0 {
			return node, nil
		}
		b, err := os.ReadFile(filepath.Join(disk.DefaultSysRoot, "class/block", p.Name, "dev"))
		if err != nil {
			return "", fmt.Errorf("partition %s has no node: %w", p.Name, err)
		}
		maj, min, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
		ma, err1 := strconv.Atoi(maj)
		mi, err2 := strconv.Atoi(min)
		if !ok || err1 != nil || err2 != nil {
			return "", fmt.Errorf("partition %s: bad device number %q", p.Name, b)
		}
		node = filepath.Join(tmp, p.Name)
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(uint32(ma), uint32(mi)))); err != nil {
			return "", fmt.Errorf("make node for %s: %w", p.Name, err)
		}
		return node, nil
	}
	return "", fmt.Errorf("the kernel has no partition %d of %s", n, dev)
}

// withBootMounted mounts dev's boot partition (ext4, by the kernel's own
// driver) on a temporary directory, runs fn on it and unmounts.
func withBootMounted(ctx context.Context, dev string, fn func(root string) error) (err error) {
	p, err := FindBootPartition(dev)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kiln-coreos-")
	if err != nil {
		return fmt.Errorf("mount boot partition: %w", err)
	}
	// Never RemoveAll: if an unmount failed, that would empty the boot
	// partition. Remove the pieces one by one instead.
	defer func() {
		os.Remove(filepath.Join(tmp, "mnt"))
		if ents, _ := os.ReadDir(tmp); len(ents) == 1 && ents[0].Type()&os.ModeDevice != 0 {
			os.Remove(filepath.Join(tmp, ents[0].Name()))
		}
		os.Remove(tmp)
	}()
	node, err := partitionNode(ctx, dev, p.Number, tmp)
	if err != nil {
		return fmt.Errorf("mount boot partition %d of %s: %w", p.Number, dev, err)
	}
	// Drop whatever the partition's page cache held from before the image
	// was written through the whole-disk device.
	if f, err := os.Open(node); err == nil {
		_ = unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
		f.Close()
	}
	mnt := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return fmt.Errorf("mount boot partition: %w", err)
	}
	if err := unix.Mount(node, mnt, "ext4", unix.MS_NOATIME|unix.MS_NODEV|unix.MS_NOSUID, ""); err != nil {
		return fmt.Errorf("mount %s (boot partition of %s) as ext4: %w", node, dev, err)
	}
	defer func() {
		if uerr := unix.Unmount(mnt, 0); uerr != nil {
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
			if err == nil {
				err = fmt.Errorf("unmount boot partition %s: %w", node, uerr)
			}
		}
	}()
	return fn(mnt)
}

// ensureExclusive refuses a disk that something holds: a mounted
// partition, swap, RAID, LVM or device-mapper. An exclusive open of the
// whole disk fails with EBUSY then, as coreos-installer's busy-partition
// check does before it writes.
func ensureExclusive(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err == unix.EBUSY {
		return fmt.Errorf("%s is in use (a partition mounted or held by swap, RAID, LVM or device-mapper): %w", dev, err)
	}
	if err != nil {
		return fmt.Errorf("check exclusive access to %s: %w", dev, err)
	}
	return unix.Close(fd)
}
