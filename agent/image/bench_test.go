package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkWrite measures the whole pipeline (HTTP from httptest, decode,
// hash, write to a file target on tmpfs where available) per format, for a
// 64 MiB image with 48 MiB of data. scripts/bench-image.sh compares with
// IPA's and the shell's ways on a 2 GiB filesystem image and a loop device.
func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	const size = 64 * mib
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(b, raw, size, 48*mib)
	data, _ := os.ReadFile(raw)
	var zb, gb bytes.Buffer
	zw, _ := zstd.NewWriter(&zb)
	zw.Write(data)
	zw.Close()
	os.WriteFile(filepath.Join(dir, "disk.raw.zst"), zb.Bytes(), 0o644)
	gw := kgzip.NewWriter(&gb)
	gw.Write(data)
	gw.Close()
	os.WriteFile(filepath.Join(dir, "disk.raw.gz"), gb.Bytes(), 0o644)
	names := []string{"disk.raw", "disk.raw.zst", "disk.raw.gz"}
	if _, err := os.Stat("/usr/bin/qemu-img"); err == nil {
		qemuImg(b, "convert", "-O", "qcow2", raw, filepath.Join(dir, "disk.qcow2"))
		qemuImg(b, "convert", "-c", "-O", "qcow2", "-o", "compression_type=zstd", raw, filepath.Join(dir, "disk-zstd.qcow2"))
		names = append(names, "disk.qcow2", "disk-zstd.qcow2")
	}
	srv := newImageServer(b, dir)
	tdir := b.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "kiln-bench"); err == nil {
			tdir = d
			defer os.RemoveAll(d)
		}
	}
	target := filepath.Join(tdir, "disk")
	makeTarget(b, target, size)
	for _, name := range names {
		sum := sumFile(b, "sha256", filepath.Join(dir, name))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if _, err := Write(context.Background(), writeReq(b, srv.url(name), "sha256", sum, target)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChecksumFloor is the speed of the checksum alone, per algorithm
// Kiln verifies: every byte of an image is hashed, so no write of a verified
// image can go faster than this (qemu-img convert verifies nothing).
func BenchmarkChecksumFloor(b *testing.B) {
	buf := bytes.Repeat([]byte("kiln-image-bytes"), 1<<16) // 1 MiB
	for _, algo := range []string{"sha256", "sha512"} {
		b.Run(algo, func(b *testing.B) {
			h := newHash(algo)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				h.Write(buf)
			}
		})
	}
}
