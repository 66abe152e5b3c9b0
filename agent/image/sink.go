package image

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT needs of buffers, offsets and lengths
// (the logical block size of nearly every disk; 4 KiB covers 4Kn disks).
const directAlign = 4096

// Sink is the disk (or, in tests and labs, a regular file) an image is
// written to. Writes that are aligned go through an O_DIRECT descriptor so
// gigabytes of image do not churn the ramdisk's page cache; runs of zeros are
// not written but zeroed (BLKZEROOUT) or punched out (files).
type Sink struct {
	path   string
	f      *os.File // buffered descriptor: unaligned writes, fsync
	direct *os.File // O_DIRECT descriptor, nil if unavailable
	block  bool
	size   int64
}

// OpenSink opens a block device or an existing regular file for writing. Its
// current size is the capacity: a file target is sized like a disk.
func OpenSink(path string) (*Sink, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open target %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat target %s: %w", path, err)
	}
	s := &Sink{path: path, f: f}
	switch {
	case st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0:
		s.block = true
		size, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("size of target %s: %w", path, err)
		}
		s.size = int64(size)
		// Only block devices get O_DIRECT: on tmpfs it fails, and on a file
		// it buys nothing the tests care about.
		if d, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0); err == nil {
			s.direct = d
		}
	case st.Mode().IsRegular():
		s.size = st.Size()
	default:
		f.Close()
		return nil, fmt.Errorf("open target %s: neither a block device nor a regular file", path)
	}
	return s, nil
}

// Size is the target's capacity in bytes.
func (s *Sink) Size() int64 { return s.size }

// WriteAt writes p at off; parallel calls on disjoint ranges are allowed.
func (s *Sink) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > s.size {
		return 0, fmt.Errorf("write %s at %d: %d bytes past the end of the %d-byte target", s.path, off, off+int64(len(p))-s.size, s.size)
	}
	f := s.f
	if s.direct != nil && aligned(p, off) {
		f = s.direct
	}
	n, err := f.WriteAt(p, off)
	if err != nil {
		return n, fmt.Errorf("write %s at %d: %w", s.path, off, err)
	}
	return n, nil
}

func aligned(p []byte, off int64) bool {
	return len(p) > 0 && off%directAlign == 0 && len(p)%directAlign == 0 &&
		uintptr(unsafe.Pointer(&p[0]))%directAlign == 0
}

var zeros = make([]byte, 1<<20)

// Zero makes [off, off+n) read as zeros without writing them: BLKZEROOUT on
// a block device (the kernel uses WRITE ZEROES or unmap where the device
// supports it), a punched hole in a file. It falls back to writing zeros.
func (s *Sink) Zero(off, n int64) error {
	if off+n > s.size {
		return fmt.Errorf("zero %s at %d: %d bytes past the end of the %d-byte target", s.path, off, off+n-s.size, s.size)
	}
	var err error
	if s.block {
		if off%512 == 0 && n%512 == 0 {
			r := [2]uint64{uint64(off), uint64(n)}
			_, _, e := unix.Syscall(unix.SYS_IOCTL, s.f.Fd(), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r)))
			if e == 0 {
				return nil
			}
			err = e
		}
	} else {
		err = unix.Fallocate(int(s.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		if err == nil {
			return nil
		}
	}
	_ = err // fall back to writing
	for n > 0 {
		c := min(n, int64(len(zeros)))
		if _, err := s.f.WriteAt(zeros[:c], off); err != nil {
			return fmt.Errorf("zero %s at %d: %w", s.path, off, err)
		}
		off += c
		n -= c
	}
	return nil
}

// Sync flushes what was written to stable storage.
func (s *Sink) Sync() error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.path, err)
	}
	return nil
}

// scrubLen is how much of each end of the disk Scrub overwrites: partition
// tables (MBR, both GPT copies) and boot loaders live there.
const scrubLen = 1 << 20

// Scrub zeroes the target's first and last MiB and syncs, so that a node
// cannot boot a half-written or unverified image.
func (s *Sink) Scrub() error {
	var errs []error
	for _, off := range []int64{0, max(s.size-scrubLen, 0)} {
		n := min(int64(scrubLen), s.size-off)
		if _, err := s.f.WriteAt(zeros[:n], off); err != nil {
			errs = append(errs, fmt.Errorf("scrub %s at %d: %w", s.path, off, err))
		}
	}
	if err := s.Sync(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Close closes the target's descriptors.
func (s *Sink) Close() error {
	if s.direct != nil {
		s.direct.Close()
	}
	return s.f.Close()
}

// isZero reports whether p holds only zeros.
func isZero(p []byte) bool {
	for len(p) > 0 {
		c := min(len(p), len(zeros))
		if !bytes.Equal(p[:c], zeros[:c]) {
			return false
		}
		p = p[c:]
	}
	return true
}

// alignedBuf returns an n-byte buffer aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	a := int(uintptr(unsafe.Pointer(&b[0])) % directAlign)
	if a != 0 {
		a = directAlign - a
	}
	return b[a : a+n : a+n]
}

var _ io.WriterAt = (*Sink)(nil)
