package image

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/lima-vm/go-qcow2reader/image/qcow2"
	qlog "github.com/lima-vm/go-qcow2reader/log"
)

// qcow2Info is what validateQCOW2 learned from an image it accepts.
type qcow2Info struct {
	Version     uint32
	ClusterBits uint32
	Size        int64 // virtual size
	ExtendedL2  bool
	Compression uint8 // 0 deflate, 1 zstd
}

// Incompatible feature bits of the qcow2 v3 header.
const (
	qcowDirty       = 1 << 0
	qcowCorrupt     = 1 << 1
	qcowDataFile    = 1 << 2
	qcowCompression = 1 << 3
	qcowExtendedL2  = 1 << 4
)

const (
	maxL1Bytes  = 32 << 20 // qemu's own limit on the L1 table
	maxVirtSize = 1 << 55  // beyond what any disk we write to could hold
)

// validateQCOW2 checks a qcow2 image read through ra (size bytes long) before
// anything is written: go-qcow2reader trusts what it reads, and would follow a
// backing file path on the agent's own filesystem. It refuses backing files,
// external data files, encryption, any inconsistent header, and L1/L2 entries that point outside the file (which
// is what a truncated download looks like). Only metadata is read.
func validateQCOW2(ra io.ReaderAt, size int64) (qcow2Info, error) {
	var info qcow2Info
	h := make([]byte, 112)
	n, err := ra.ReadAt(h, 0)
	if n < 72 {
		return info, fmt.Errorf("qcow2 header: %d bytes: %w", n, errors.Join(err, io.ErrUnexpectedEOF))
	}
	h = h[:n]
	be := binary.BigEndian
	if string(h[:4]) != "QFI\xfb" {
		return info, errors.New("qcow2 header: bad magic")
	}
	info.Version = be.Uint32(h[4:])
	backingOff, backingLen := be.Uint64(h[8:]), be.Uint32(h[16:])
	info.ClusterBits = be.Uint32(h[20:])
	virt := be.Uint64(h[24:])
	crypt := be.Uint32(h[32:])
	l1Size := be.Uint32(h[36:])
	l1Off := be.Uint64(h[40:])
	if info.Version != 2 && info.Version != 3 {
		return info, fmt.Errorf("qcow2 header: unsupported version %d", info.Version)
	}
	if backingOff != 0 {
		name := ""
		if backingLen > 0 && backingLen <= 1023 {
			b := make([]byte, backingLen)
			if _, err := ra.ReadAt(b, int64(backingOff)); err == nil {
				name = fmt.Sprintf(" %q", b)
			}
		}
		return info, fmt.Errorf("qcow2 image has a backing file%s: only self-contained images can be written", name)
	}
	if crypt != 0 {
		return info, fmt.Errorf("qcow2 image is encrypted (method %d)", crypt)
	}
	if info.ClusterBits < 9 || info.ClusterBits > 21 {
		return info, fmt.Errorf("qcow2 header: cluster_bits %d outside 9..21", info.ClusterBits)
	}
	cluster := int64(1) << info.ClusterBits
	headerLen := uint32(72)
	if info.Version == 3 {
		if n < 104 {
			return info, fmt.Errorf("qcow2 header: v3 header cut short at %d bytes", n)
		}
		incompat := be.Uint64(h[72:])
		headerLen = be.Uint32(h[100:])
		if headerLen < 104 || headerLen%8 != 0 || int64(headerLen) > cluster {
			return info, fmt.Errorf("qcow2 header: bad header_length %d", headerLen)
		}
		switch {
		case incompat&qcowDataFile != 0:
			return info, errors.New("qcow2 image keeps its data in an external data file: only self-contained images can be written")
		case incompat&qcowCorrupt != 0:
			return info, errors.New("qcow2 image is marked corrupt")
		case incompat&^(qcowDirty|qcowCompression|qcowExtendedL2) != 0:
			return info, fmt.Errorf("qcow2 header: unknown incompatible features %#x", incompat)
		}
		info.ExtendedL2 = incompat&qcowExtendedL2 != 0
		if info.ExtendedL2 && info.ClusterBits < 14 {
			return info, fmt.Errorf("qcow2 header: extended L2 with %d-byte clusters", cluster)
		}
		if headerLen > 104 {
			if n < 105 {
				return info, errors.New("qcow2 header: compression type cut short")
			}
			info.Compression = h[104]
		}
		if info.Compression > 1 {
			return info, fmt.Errorf("qcow2 header: unknown compression type %d", info.Compression)
		}
		if (info.Compression != 0) != (incompat&qcowCompression != 0) {
			return info, errors.New("qcow2 header: compression type and its feature bit disagree")
		}
	}
	if err := checkExtensions(ra, int64(headerLen), cluster); err != nil {
		return info, err
	}
	if virt == 0 || virt > maxVirtSize {
		return info, fmt.Errorf("qcow2 header: bad virtual size %d", virt)
	}
	info.Size = int64(virt)

	// The L1 table must cover the virtual size and lie inside the file.
	l2Entries := cluster / 8
	entryLen := int64(8)
	if info.ExtendedL2 {
		l2Entries, entryLen = cluster/16, 16
	}
	perL2 := l2Entries * cluster
	need := (int64(virt) + perL2 - 1) / perL2
	switch {
	case int64(l1Size) < need:
		return info, fmt.Errorf("qcow2 header: L1 table of %d entries cannot map %d bytes (%d needed)", l1Size, virt, need)
	case int64(l1Size)*8 > maxL1Bytes:
		return info, fmt.Errorf("qcow2 header: L1 table of %d entries is too large", l1Size)
	case l1Off == 0 || l1Off%uint64(cluster) != 0:
		return info, fmt.Errorf("qcow2 header: L1 table offset %d not cluster aligned", l1Off)
	case l1Off > uint64(size) || int64(l1Off)+int64(l1Size)*8 > size:
		return info, fmt.Errorf("qcow2 header: L1 table at %d (%d entries) past the end of the %d-byte file", l1Off, l1Size, size)
	}
	l1 := make([]byte, int64(need)*8) // entries past need map nothing
	if _, err := ra.ReadAt(l1, int64(l1Off)); err != nil {
		return info, fmt.Errorf("read qcow2 L1 table: %w", err)
	}
	l2 := make([]byte, cluster)
	for i := int64(0); i < need; i++ {
		e := be.Uint64(l1[i*8:])
		off := int64(e & 0x00fffffffffffe00)
		if e&0x7f000000000001ff != 0 {
			return info, fmt.Errorf("qcow2 L1 entry %d: reserved bits set (%#x)", i, e)
		}
		if off == 0 {
			continue
		}
		if off%cluster != 0 || off+cluster > size {
			return info, fmt.Errorf("qcow2 L1 entry %d: L2 table at %d outside the %d-byte file or unaligned", i, off, size)
		}
		if _, err := ra.ReadAt(l2, off); err != nil {
			return info, fmt.Errorf("read qcow2 L2 table %d at %d: %w", i, off, err)
		}
		// Only entries that map into the virtual size matter.
		count := min(l2Entries, (int64(virt)-i*perL2+cluster-1)/cluster)
		for j := int64(0); j < count; j++ {
			if err := checkL2Entry(be.Uint64(l2[j*entryLen:]), info.ClusterBits, size, info.ExtendedL2); err != nil {
				return info, fmt.Errorf("qcow2 L2 table %d entry %d: %w", i, j, err)
			}
		}
	}
	return info, nil
}

// checkL2Entry checks one L2 entry. With extended L2 entries qemu writes only
// the allocated subclusters, so the file may end inside the last cluster.
func checkL2Entry(e uint64, clusterBits uint32, size int64, extended bool) error {
	cluster := int64(1) << clusterBits
	if e&(1<<62) != 0 { // compressed
		x := 62 - (clusterBits - 8)
		off := int64(e & (1<<x - 1))
		if off == 0 || off >= size {
			return fmt.Errorf("compressed cluster at %d outside the %d-byte file", off, size)
		}
		return nil
	}
	off := int64(e & 0x00fffffffffffe00)
	if off == 0 {
		return nil
	}
	if e&0x3f000000000001fe != 0 {
		return fmt.Errorf("reserved bits set (%#x)", e)
	}
	end := off + cluster
	if extended {
		end = off + 1
	}
	if off%cluster != 0 || end > size {
		return fmt.Errorf("data cluster at %d outside the %d-byte file or unaligned", off, size)
	}
	return nil
}

// Header extension types that make an image depend on something we refuse.
const (
	extEnd        = 0
	extDataFile   = 0x44415441
	extEncryption = 0x0537be77
)

// checkExtensions walks the header extensions, which must end inside the
// first cluster.
func checkExtensions(ra io.ReaderAt, off, cluster int64) error {
	buf := make([]byte, cluster)
	n, err := ra.ReadAt(buf, 0)
	if int64(n) < min(cluster, off+8) {
		return fmt.Errorf("read qcow2 header extensions: %w", errors.Join(err, io.ErrUnexpectedEOF))
	}
	buf = buf[:n]
	for i := 0; ; i++ {
		if off+8 > int64(len(buf)) || i > 256 {
			return errors.New("qcow2 header extensions do not end inside the first cluster")
		}
		typ := binary.BigEndian.Uint32(buf[off:])
		l := int64(binary.BigEndian.Uint32(buf[off+4:]))
		switch typ {
		case extEnd:
			return nil
		case extDataFile:
			return errors.New("qcow2 image names an external data file: only self-contained images can be written")
		case extEncryption:
			return errors.New("qcow2 image has an encryption header")
		}
		off += 8 + (l+7)/8*8
	}
}

// The qcow2 reader decompresses each cluster through these. Both read a whole
// cluster per Read (the reader restarts decompression after a short read),
// and reuse decoders, which are costly to allocate per 64 KiB cluster.
var (
	flatePool sync.Pool
	zstdPool  sync.Pool
)

func init() {
	// The reader warns about things validateQCOW2 already decided on
	// (extended L2 is "experimental"); keep them out of the console.
	qlog.SetWarnFunc(func(s string) { slog.Debug("go-qcow2reader", "warning", s) })
	qcow2.SetDecompressor(qcow2.CompressionTypeZlib, func(r io.Reader) (io.ReadCloser, error) {
		if fr, ok := flatePool.Get().(io.ReadCloser); ok {
			if err := fr.(flate.Resetter).Reset(r, nil); err == nil {
				return &fullReader{r: fr, put: func() { flatePool.Put(fr) }}, nil
			}
		}
		fr := flate.NewReader(r)
		return &fullReader{r: fr, put: func() { flatePool.Put(fr) }}, nil
	})
	qcow2.SetDecompressor(qcow2.CompressionTypeZstd, func(r io.Reader) (io.ReadCloser, error) {
		d, ok := zstdPool.Get().(*zstd.Decoder)
		if !ok {
			var err error
			d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(8<<20))
			if err != nil {
				return nil, err
			}
		}
		if err := d.Reset(r); err != nil {
			zstdPool.Put(d)
			return nil, err
		}
		return &fullReader{r: d, put: func() { d.Reset(nil); zstdPool.Put(d) }}, nil
	})
}

// fullReader fills each Read completely unless the stream ends.
type fullReader struct {
	r   io.Reader
	put func()
}

// The reader asks for no more than the rest of the cluster, and a
// compressed cluster always inflates to a whole cluster: data that ends
// first is a corrupt cluster, not the end of the image.
func (f *fullReader) Read(p []byte) (int, error) {
	n, err := io.ReadFull(f.r, p)
	if err == io.ErrUnexpectedEOF || (err == io.EOF && len(p) > 0) {
		err = fmt.Errorf("compressed cluster data ends after %d of %d bytes: %w", n, len(p), io.ErrUnexpectedEOF)
	}
	return n, err
}

func (f *fullReader) Close() error {
	if f.put != nil {
		f.put()
		f.put = nil
	}
	return nil
}
