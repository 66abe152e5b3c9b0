package erase

import (
	"bytes"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"slices"
)

// canaryMagic starts every canary block, so a leftover one is recognisable
// in a hex dump.
var canaryMagic = []byte("kiln-erase-canary")

// Verifier proves an erase happened. Arm writes canary blocks (unique
// random data) where the erase must reach, syncs and reads them back: a
// device that does not keep writes fails there, since no erase of it could
// be verified. After the erase, Verify demands that no canary survived and
// that a method promising zeroes left zeroes in every block it reads.
type Verifier struct {
	d        Disk
	m        Method
	canaries map[int64][]byte
	// whole lists extents read in full by Verify, which must be zero.
	whole []region
	// regions are what MetadataOnly zeroes.
	regions []region
}

const sampleBlock = 4096

// Arm prepares the verification of erasing d by m, before the erase. For
// a whole-disk method the canaries go to the first and last 4 KiB and to
// samples random 4 KiB blocks (and a zeroing method must also leave the
// first and last MiB zero); for MetadataOnly, to the start of every
// region the metadata wipe zeroes, all of which must read as zero.
func Arm(d Disk, m Method, samples int) (*Verifier, error) {
	v := &Verifier{d: d, m: m, canaries: map[int64][]byte{}}
	size, ss := d.Size(), int64(d.SectorSize())
	bs := max(sampleBlock, ss) / ss * ss
	if m == MetadataOnly {
		regions, err := metadataRegions(d)
		if err != nil {
			return nil, err
		}
		v.regions = regions
		for _, r := range regions {
			v.whole = append(v.whole, r)
			if err := v.plant(r.off, min(bs, r.n)); err != nil {
				return nil, err
			}
		}
	} else {
		offs := []int64{0, (size - bs) / bs * bs}
		for range samples {
			offs = append(offs, mrand.Int64N(max(size/bs, 1))*bs)
		}
		slices.Sort(offs)
		for _, off := range slices.Compact(offs) {
			if off < 0 || off+bs > size {
				continue
			}
			if err := v.plant(off, bs); err != nil {
				return nil, err
			}
		}
		if m.zeroes() {
			edge := min(int64(1<<20), size) / ss * ss
			v.whole = append(v.whole, region{0, edge, "first MiB"}, region{size - edge, edge, "last MiB"})
		}
	}
	if err := d.Sync(); err != nil {
		return nil, fmt.Errorf("sync canary blocks: %w", err)
	}
	for off, want := range v.canaries {
		got := make([]byte, len(want))
		if _, err := d.ReadAt(got, off); err != nil {
			return nil, fmt.Errorf("read back canary block at offset %d: %w", off, err)
		}
		if !bytes.Equal(got, want) {
			return nil, fmt.Errorf("%s does not keep what is written to it (the block at offset %d read back different data after a write and sync), so no erase of it could be verified", d.Path(), off)
		}
	}
	return v, nil
}

func (v *Verifier) plant(off, n int64) error {
	b := make([]byte, n)
	rand.Read(b)
	copy(b, canaryMagic)
	if _, err := v.d.WriteAt(b, off); err != nil {
		return fmt.Errorf("write canary block at offset %d: %w", off, err)
	}
	v.canaries[off] = b
	return nil
}

// Verify reads the canaries and extents back after the erase and returns
// how many bytes it read; an error says where the erase did not reach.
func (v *Verifier) Verify() (int64, error) {
	var checked int64
	for off, want := range v.canaries {
		got := make([]byte, len(want))
		if _, err := v.d.ReadAt(got, off); err != nil {
			return checked, fmt.Errorf("read block at offset %d: %w", off, err)
		}
		checked += int64(len(got))
		if bytes.Equal(got, want) {
			return checked, fmt.Errorf("the block at offset %d still holds the data written before the erase: the disk was not erased", off)
		}
		if v.m.zeroes() && !allZero(got) {
			return checked, fmt.Errorf("the block at offset %d is not zero after %s", off, v.m)
		}
	}
	buf := make([]byte, 1<<20)
	for _, r := range v.whole {
		for off := r.off; off < r.off+r.n; off += int64(len(buf)) {
			b := buf[:min(int64(len(buf)), r.off+r.n-off)]
			if _, err := v.d.ReadAt(b, off); err != nil {
				return checked, fmt.Errorf("read %s at offset %d: %w", r.what, off, err)
			}
			checked += int64(len(b))
			if i := firstNonZero(b); i >= 0 {
				return checked, fmt.Errorf("%s is not zero after %s (non-zero byte at offset %d)", r.what, v.m, off+int64(i))
			}
		}
	}
	return checked, nil
}

func allZero(b []byte) bool { return firstNonZero(b) < 0 }

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}
