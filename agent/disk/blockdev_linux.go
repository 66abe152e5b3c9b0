package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sectorSize is the logical sector size of f: BLKSSZGET on a block
// device, 512 for an image file.
func sectorSize(f *os.File) int {
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
	if err != nil || n < 512 {
		return 512
	}
	return n
}

func isBlockDevice(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// RereadPartitions makes the kernel's partitions of dev (/dev/sdaN) match
// the table now on the disk. It asks for a re-read (BLKRRPART; udev or a
// just-closed writer can keep the device busy for a moment, so EBUSY is
// retried), then checks the result against the table as Kiln reads it and
// adds or removes what differs one partition at a time (BLKPG), as partx
// does: a kernel without a parser for the table, or a disk with a partition
// in use, still ends up with the right partition devices.
func RereadPartitions(ctx context.Context, dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("re-read partitions of %s: %w", dev, err)
	}
	defer f.Close()
	return rereadFile(ctx, f)
}

func rereadFile(ctx context.Context, f *os.File) error {
	var err error
	for range 20 {
		if err = unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0); !errors.Is(err, unix.EBUSY) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("re-read partitions of %s: %w", f.Name(), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if rerr := syncKernelPartitions(f); rerr != nil {
		if err != nil {
			return fmt.Errorf("re-read partitions of %s: %w (after BLKRRPART: %v)", f.Name(), rerr, err)
		}
		return fmt.Errorf("re-read partitions of %s: %w", f.Name(), rerr)
	}
	return nil
}

type kernelPart struct{ start, size int64 } // bytes

// KernelPartitions lists the partitions the kernel currently has for dev
// (from sysfs), which can differ from the table on the disk: numbers,
// starts and sizes only.
func KernelPartitions(dev string) ([]Partition, error) {
	real, err := filepath.EvalSymlinks(dev)
	if err != nil {
		return nil, fmt.Errorf("kernel partitions of %s: %w", dev, err)
	}
	name := filepath.Base(real)
	sysDir := filepath.Join(DefaultSysRoot, "class/block", name)
	entries, err := os.ReadDir(sysDir)
	if err != nil {
		return nil, fmt.Errorf("kernel partitions of %s: %w", dev, err)
	}
	var parts []Partition
	for _, e := range entries {
		d := filepath.Join(sysDir, e.Name())
		n, err := strconv.Atoi(readString(filepath.Join(d, "partition")))
		if err != nil {
			continue
		}
		start, _ := strconv.ParseInt(readString(filepath.Join(d, "start")), 10, 64)
		size, _ := strconv.ParseInt(readString(filepath.Join(d, "size")), 10, 64)
		parts = append(parts, Partition{Number: n, Start: start * 512, Size: size * 512, Name: e.Name()})
	}
	return parts, nil
}

// syncKernelPartitions compares the kernel's partitions of f with its
// table and fixes the difference with BLKPG.
func syncKernelPartitions(f *os.File) error {
	kparts, err := KernelPartitions(f.Name())
	if err != nil {
		return err
	}
	have := map[int]kernelPart{}
	for _, p := range kparts {
		have[p.Number] = kernelPart{p.Start, p.Size}
	}
	want := map[int]kernelPart{}
	t, err := readTable(f)
	if err != nil && !errors.Is(err, ErrNoTable) {
		return err
	}
	for _, p := range t.Partitions {
		want[p.Number] = kernelPart{p.Start, p.Size}
	}
	for n, k := range have {
		if w, ok := want[n]; !ok || w != k {
			if err := blkpg(f, unix.BLKPG_DEL_PARTITION, n, kernelPart{}); err != nil {
				return fmt.Errorf("remove stale partition %d: %w", n, err)
			}
			delete(have, n)
		}
	}
	for n, w := range want {
		if _, ok := have[n]; !ok {
			if err := blkpg(f, unix.BLKPG_ADD_PARTITION, n, w); err != nil {
				return fmt.Errorf("add partition %d: %w", n, err)
			}
		}
	}
	return nil
}

func blkpg(f *os.File, op int32, n int, p kernelPart) error {
	part := unix.BlkpgPartition{Start: p.start, Length: p.size, Pno: int32(n)}
	arg := unix.BlkpgIoctlArg{
		Op:      op,
		Datalen: int32(unsafe.Sizeof(part)),
		Data:    (*byte)(unsafe.Pointer(&part)),
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg)))
	if errno != 0 {
		return errno
	}
	return nil
}
