package erase

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kilnhq/kiln/agent/disk"
)

// region is a byte extent of the disk to zero.
type region struct {
	off, n int64
	what   string
}

// edge is how much is zeroed at each end of the disk and of each
// partition. The first MiB holds every signature wipefs and blkid look
// for near the start: MBR and GPT (LBA 0–33), md superblocks 1.1 (0) and
// 1.2 (4 KiB), the LVM label (sector 1) and its metadata area, ext2/3/4
// (1 KiB), XFS (0), btrfs' primary superblock (64 KiB), FAT/vfat boot
// sectors (0), swap (page size − 10, up to 64 KiB pages), ISO9660 and
// UDF volume descriptors (32 KiB on), ZFS labels 0 and 1 (0, 256 KiB),
// bcache (4 KiB). The last MiB holds the backup GPT (last 33 LBAs), md
// 0.90 (64 KiB-aligned, within the last 128 KiB) and 1.0 (last 8–12 KiB)
// superblocks and ZFS labels 2 and 3 (last 512 KiB).
const edge = 1 << 20

// btrfsMirrors are the offsets of btrfs' backup superblocks.
var btrfsMirrors = []int64{64 << 20, 256 << 30}

// metadataRegions lists what erase_devices_metadata zeroes on d: both
// edges of the disk and of every partition (from the table on the disk
// and from the kernel's view, which may be stale), btrfs superblock
// mirrors, and a backup GPT left mid-disk by an image smaller than the
// disk.
func metadataRegions(d Disk) ([]region, error) {
	size, ss := d.Size(), d.SectorSize()
	type extent struct {
		off, n int64
		what   string
	}
	extents := []extent{{0, size, d.Path()}}
	if t, err := disk.ReadTableFrom(d, size, ss); err == nil {
		for _, p := range t.Partitions {
			extents = append(extents, extent{p.Start, p.Size, fmt.Sprintf("partition %d", p.Number)})
		}
	}
	for _, p := range d.KernelPartitions() {
		extents = append(extents, extent{p.Start, p.Size, fmt.Sprintf("kernel partition %d", p.Number)})
	}
	var rs []region
	for _, e := range extents {
		if e.off < 0 || e.n <= 0 || e.off+e.n > size {
			continue // a table entry pointing off the disk: nothing there to wipe
		}
		k := min(edge, e.n)
		rs = append(rs, region{e.off, k, "start of " + e.what}, region{e.off + e.n - k, k, "end of " + e.what})
		for _, m := range btrfsMirrors {
			if m+sampleBlock <= e.n {
				rs = append(rs, region{e.off + m, sampleBlock, "btrfs superblock mirror of " + e.what})
			}
		}
	}
	if r, ok := staleBackupGPT(d); ok {
		rs = append(rs, r)
	}
	return mergeRegions(rs, int64(ss)), nil
}

// staleBackupGPT finds the backup GPT a primary header points to when it is
// not at the end of the disk.
func staleBackupGPT(d Disk) (region, bool) {
	ss := int64(d.SectorSize())
	h := make([]byte, ss)
	if _, err := d.ReadAt(h, ss); err != nil || !bytes.Equal(h[:8], []byte("EFI PART")) {
		return region{}, false
	}
	alt := int64(binary.LittleEndian.Uint64(h[32:40]))
	entries := int64(binary.LittleEndian.Uint32(h[80:84])) * int64(binary.LittleEndian.Uint32(h[84:88]))
	entries = min((entries+ss-1)/ss*ss, edge)
	last := d.Size()/ss - 1
	if alt <= 1 || alt >= last || alt*ss-entries < 0 {
		return region{}, false
	}
	return region{alt*ss - entries, entries + ss, "backup GPT left inside the disk"}, true
}

// mergeRegions aligns regions to sectors, sorts them and joins overlaps.
func mergeRegions(rs []region, ss int64) []region {
	for i := range rs {
		end := (rs[i].off + rs[i].n + ss - 1) / ss * ss
		rs[i].off = rs[i].off / ss * ss
		rs[i].n = end - rs[i].off
	}
	slices.SortFunc(rs, func(a, b region) int { return int(min(max(a.off-b.off, -1), 1)) })
	var out []region
	for _, r := range rs {
		if n := len(out); n > 0 && r.off <= out[n-1].off+out[n-1].n {
			last := &out[n-1]
			last.n = max(last.n, r.off+r.n-last.off)
			if !bytes.Contains([]byte(last.what), []byte(r.what)) {
				last.what += ", " + r.what
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func zeroRegions(ctx context.Context, d Disk, rs []region) error {
	zero := make([]byte, edge)
	for _, r := range rs {
		for off := r.off; off < r.off+r.n; off += edge {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(edge, r.off+r.n-off)
			if _, err := d.WriteAt(zero[:n], off); err != nil {
				return fmt.Errorf("zero %s at offset %d: %w", r.what, off, err)
			}
		}
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}
