package image

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// compressible returns n bytes that compress to about a third, evenly, so
// that a cut at a fraction of the compressed file falls at about the same
// fraction of the image.
func compressible(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = "kiln"[r.IntN(4)]
	}
	return b
}

func compress(t testing.TB, f Format, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	var err error
	switch f {
	case FormatGzip:
		w = gzip.NewWriter(&b)
	case FormatZstd:
		w, err = zstd.NewWriter(&b)
	case FormatXZ:
		w, err = xz.NewWriter(&b)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func isZeroFile(t testing.TB, path string, off, n int64) bool {
	t.Helper()
	return isZero(readAt(t, path, off, n))
}

// TestStreamIntegrity writes each compression format whole, as several
// concatenated streams, cut short, corrupt and followed by other bytes, each
// with the checksum of exactly the bytes served: only the format can tell a
// truncated file from a whole one. Every broken stream must be refused with
// the format, the offsets and the decompressor's words, and the target's
// first MiB zeroed.
func TestStreamIntegrity(t *testing.T) {
	data := compressible(8*mib, 14) // past one 4 MiB chunk at three quarters
	type tc struct {
		name    string
		served  func(whole, twoStreams []byte) []byte
		ok      bool
		cutOnly bool // the decompressor must have read every served byte
	}
	cases := []tc{
		{name: "whole", ok: true, served: func(w, _ []byte) []byte { return w }},
		{name: "two streams", ok: true, served: func(_, two []byte) []byte { return two }},
		{name: "cut at three quarters", cutOnly: true, served: func(w, _ []byte) []byte { return w[:len(w)*3/4] }},
		{name: "last byte missing", cutOnly: true, served: func(w, _ []byte) []byte { return w[:len(w)-1] }},
		{name: "second stream cut", cutOnly: true, served: func(_, two []byte) []byte { return two[:len(two)-len(two)/8] }},
		{name: "corrupt at three quarters", served: func(w, _ []byte) []byte {
			c := bytes.Clone(w)
			for i := len(c) * 3 / 4; i < len(c)*3/4+64; i++ {
				c[i] ^= 0x5a
			}
			return c
		}},
		{name: "trailing garbage", served: func(w, _ []byte) []byte {
			return append(bytes.Clone(w), "this is not part of any stream\n"...)
		}},
		{name: "three trailing zeros", served: func(w, _ []byte) []byte { return append(bytes.Clone(w), 0, 0, 0) }},
	}
	formats := []Format{FormatGzip, FormatZstd, FormatXZ}
	dir := t.TempDir()
	srv := newImageServer(t, dir)
	for _, f := range formats {
		whole := compress(t, f, data)
		two := append(compress(t, f, data[:3*mib+12345]), compress(t, f, data[3*mib+12345:])...)
		fcases := cases
		if f == FormatXZ {
			// xz alone allows stream padding: NULs in multiples of four.
			fcases = append(fcases, tc{name: "stream padding", ok: true, served: func(w, _ []byte) []byte {
				return append(bytes.Clone(w), 0, 0, 0, 0, 0, 0, 0, 0)
			}})
		}
		for _, c := range fcases {
			t.Run(fmt.Sprintf("%s/%s", f, c.name), func(t *testing.T) {
				served := c.served(whole, two)
				name := fmt.Sprintf("%s-%s", f, strings.ReplaceAll(c.name, " ", "-"))
				if err := os.WriteFile(filepath.Join(dir, name), served, 0o644); err != nil {
					t.Fatal(err)
				}
				target := filepath.Join(t.TempDir(), "disk")
				makeTarget(t, target, int64(len(data))+2*mib)
				req := writeReq(t, srv.url(name), "sha256", sumFile(t, "sha256", filepath.Join(dir, name)), target)
				res, err := Write(context.Background(), req)
				if c.ok {
					if err != nil {
						t.Fatal(err)
					}
					if res.Format != f || res.Size != int64(len(data)) {
						t.Fatalf("result %+v", res)
					}
					if !bytes.Equal(readAt(t, target, 0, int64(len(data))), data) {
						t.Fatal("target differs from the image")
					}
					return
				}
				var se *StreamError
				if !errors.As(err, &se) {
					t.Fatalf("err = %v, want a *StreamError", err)
				}
				msg := err.Error()
				for _, want := range []string{string(f) + " stream", "compressed offset", "image offset", se.Err.Error(), "were zeroed"} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not say %q", msg, want)
					}
				}
				if se.Format != f || se.Served > int64(len(served)) {
					t.Errorf("stream error %+v for %d bytes served", se, len(served))
				}
				if c.cutOnly && (se.Served != int64(len(served)) || !errors.Is(err, io.ErrUnexpectedEOF)) {
					t.Errorf("cut stream: %+v, want all %d bytes read and an unexpected EOF", se, len(served))
				}
				if !isZeroFile(t, target, 0, mib) {
					t.Error("the target's first MiB was not zeroed")
				}
			})
		}
	}
}

// eofDecoder stops after its data, as a decompressor that does not read
// concatenated streams would.
type eofDecoder struct{ r io.Reader }

func (d eofDecoder) Read(p []byte) (int, error) { return d.r.Read(p) }

// TestCheckedStreamTrailingData covers a decompressor that ends before its
// source does: the rest is refused, not silently hashed and dropped.
func TestCheckedStreamTrailingData(t *testing.T) {
	for _, c := range []struct {
		rest    string
		wantErr bool
	}{{"", false}, {"x", true}, {"\x00\x00\x00\x00", true}} {
		src := &countingReader{r: strings.NewReader("image" + c.rest)}
		s := &checkedStream{format: FormatGzip, dec: eofDecoder{io.LimitReader(src, 5)}, src: src}
		got, err := io.ReadAll(s)
		var se *StreamError
		if c.wantErr != errors.As(err, &se) || string(got) != "image" {
			t.Fatalf("rest %q: read %q, err %v", c.rest, got, err)
		}
		if c.wantErr && (se.Served != 5 || se.Decoded != 5 || !errors.Is(err, errTrailingData)) {
			t.Fatalf("rest %q: %+v", c.rest, se)
		}
	}
}

// corruptCompressedCluster overwrites the start of the compressed data of
// guest cluster idx in a qcow2 file made by qemu-img convert -c, and
// returns the cluster's host offset.
func corruptCompressedCluster(t testing.TB, path string, idx int64) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	be := binary.BigEndian
	u64 := func(off int64) uint64 {
		var b [8]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		return be.Uint64(b[:])
	}
	var h [48]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		t.Fatal(err)
	}
	bits := be.Uint32(h[20:])
	l1 := int64(be.Uint64(h[40:]))
	perL2 := int64(1) << (bits - 3)
	l2 := int64(u64(l1+8*(idx/perL2)) & 0x00fffffffffffe00)
	if l2 == 0 {
		t.Fatalf("cluster %d has no L2 table", idx)
	}
	e := u64(l2 + 8*(idx%perL2))
	if e&(1<<62) == 0 {
		t.Fatalf("cluster %d is not compressed (L2 entry %#x)", idx, e)
	}
	host := int64(e & (1<<(62-(bits-8)) - 1))
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, 16), host); err != nil {
		t.Fatal(err)
	}
	return host
}

// TestQCOW2CorruptCompressedCluster breaks one compressed cluster: the
// write fails naming that cluster, its guest offset and the inflater's
// error (not "context canceled"), and the target's first MiB is zeroed.
func TestQCOW2CorruptCompressedCluster(t *testing.T) {
	needTool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	data := compressible(12*mib, 7)
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	qcow := filepath.Join(dir, "disk.qcow2")
	qemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, qcow)
	const cluster = 150 // 64 KiB clusters: guest offset 9.375 MiB, in the third chunk
	corruptCompressedCluster(t, qcow, cluster)
	srv := newImageServer(t, dir)
	for i := range 3 { // the failing chunk races the others to the pipeline
		target := filepath.Join(t.TempDir(), "disk")
		makeTarget(t, target, int64(len(data))+2*mib)
		req := writeReq(t, srv.url("disk.qcow2"), "sha256", sumFile(t, "sha256", qcow), target)
		_, err := Write(context.Background(), req)
		var ce *ClusterError
		if !errors.As(err, &ce) {
			t.Fatalf("run %d: err = %v, want a *ClusterError", i, err)
		}
		msg := err.Error()
		if ce.Index != cluster || ce.Offset != cluster<<16 {
			t.Fatalf("run %d: %+v, want cluster %d at %d", i, ce, cluster, cluster<<16)
		}
		for _, want := range []string{fmt.Sprintf("qcow2 cluster %d (guest offset %d)", cluster, cluster<<16), "corrupt input", "were zeroed"} {
			if !strings.Contains(msg, want) {
				t.Errorf("run %d: error %q does not say %q", i, msg, want)
			}
		}
		if strings.Contains(msg, "context canceled") {
			t.Errorf("run %d: error %q blames the cancellation", i, msg)
		}
		if !isZeroFile(t, target, 0, mib) {
			t.Errorf("run %d: the target's first MiB was not zeroed", i)
		}
	}
}
