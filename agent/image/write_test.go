package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

const mib = 1 << 20

func writeReq(t testing.TB, url, algo, value, target string) Request {
	cs, err := ParseChecksum(algo, value, true)
	if err != nil {
		t.Fatal(err)
	}
	return Request{URL: url, Checksum: cs, Target: target, AllowMD5: true, RetryDelay: 10 * time.Millisecond, Retries: 3}
}

// TestQCOW2MatchesQemuImg writes qcow2 images made by qemu-img in several
// layouts over HTTP and compares the disk with `qemu-img convert -O raw`.
func TestQCOW2MatchesQemuImg(t *testing.T) {
	needTool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "src.raw")
	makeRaw(t, raw, 24*mib, 20*mib)
	small := filepath.Join(dir, "small.raw")
	makeRaw(t, small, 6*mib, 5*mib+12345)
	srv := newImageServer(t, dir)

	cases := []struct {
		name    string
		from    string
		opts    []string
		resize  string
		virtual int64
	}{
		{name: "default", from: raw, virtual: 24 * mib},
		{name: "zlib", from: raw, opts: []string{"-c"}, virtual: 24 * mib},
		{name: "zstd", from: raw, opts: []string{"-c", "-o", "compression_type=zstd"}, virtual: 24 * mib},
		{name: "cluster64k", from: raw, opts: []string{"-o", "cluster_size=64k"}, virtual: 24 * mib},
		{name: "cluster2m", from: raw, opts: []string{"-o", "cluster_size=2M"}, virtual: 24 * mib},
		{name: "cluster2m-zstd", from: raw, opts: []string{"-c", "-o", "cluster_size=2M,compression_type=zstd"}, virtual: 24 * mib},
		{name: "extended-l2", from: raw, opts: []string{"-o", "extended_l2=on"}, virtual: 24 * mib},
		{name: "extended-l2-compressed", from: raw, opts: []string{"-c", "-o", "extended_l2=on,cluster_size=128k"}, virtual: 24 * mib},
		{name: "prealloc-metadata", from: raw, opts: []string{"-o", "preallocation=metadata"}, virtual: 24 * mib},
		{name: "prealloc-full", from: raw, opts: []string{"-o", "preallocation=full"}, virtual: 24 * mib},
		{name: "v2-compat", from: raw, opts: []string{"-o", "compat=0.10"}, virtual: 24 * mib},
		{name: "bigger-than-data", from: small, resize: "64M", virtual: 64 * mib},
		{name: "odd-size", from: small, resize: "6291968", virtual: 6291968},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(dir, tc.name+".qcow2")
			qemuImg(t, append(append([]string{"convert", "-O", "qcow2"}, tc.opts...), tc.from, img)...)
			if tc.resize != "" {
				qemuImg(t, "resize", "-q", img, tc.resize)
			}
			want := filepath.Join(t.TempDir(), "want.raw")
			qemuImg(t, "convert", "-O", "raw", img, want)

			target := filepath.Join(t.TempDir(), "disk")
			makeTarget(t, target, tc.virtual+2*mib)
			var last, total int64
			req := writeReq(t, srv.url(filepath.Base(img)), "", sumFile(t, "sha256", img), target)
			req.Progress = func(d, tt int64) { last, total = d, tt }
			res, err := Write(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != FormatQCOW2 || res.Size != tc.virtual {
				t.Errorf("result %+v, want qcow2 of %d bytes", res, tc.virtual)
			}
			if got, w := fileSHA(t, target, tc.virtual), fileSHA(t, want, tc.virtual); got != w {
				t.Errorf("disk sha256 %s, qemu-img convert gives %s", got, w)
			}
			if last != tc.virtual || total != tc.virtual {
				t.Errorf("last progress %d/%d, want %d/%d", last, total, tc.virtual, tc.virtual)
			}
			if res.Written+res.Zeroed != tc.virtual {
				t.Errorf("written %d + zeroed %d != %d", res.Written, res.Zeroed, tc.virtual)
			}
			if res.Zeroed == 0 {
				t.Errorf("no zero runs detected in an image that has some")
			}
		})
	}
}

// TestStreamFormats writes raw and compressed raw images with each
// checksum algorithm.
func TestStreamFormats(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 20*mib+4096+17, 14*mib)
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	compress := map[string]func(w *bytes.Buffer) error{
		"disk.raw": func(w *bytes.Buffer) error { _, err := w.Write(data); return err },
		"disk.raw.gz": func(w *bytes.Buffer) error {
			z := gzip.NewWriter(w)
			z.Write(data)
			return z.Close()
		},
		"disk.raw.zst": func(w *bytes.Buffer) error {
			z, _ := zstd.NewWriter(w)
			z.Write(data)
			return z.Close()
		},
		"disk.img": func(w *bytes.Buffer) error { // xz, named as if raw
			z, err := xz.NewWriter(w)
			if err != nil {
				return err
			}
			z.Write(data)
			return z.Close()
		},
	}
	formats := map[string]Format{"disk.raw": FormatRaw, "disk.raw.gz": FormatGzip, "disk.raw.zst": FormatZstd, "disk.img": FormatXZ}
	algos := []string{"sha256", "sha512", "md5"}
	i := 0
	for name, fn := range compress {
		var b bytes.Buffer
		if err := fn(&b); err != nil {
			t.Fatal(err)
		}
		if name != "disk.raw" {
			os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
		}
		algo := algos[i%len(algos)]
		i++
		t.Run(name+"-"+algo, func(t *testing.T) {
			srv := newImageServer(t, dir)
			target := filepath.Join(t.TempDir(), "disk")
			makeTarget(t, target, int64(len(data))+3*mib)
			req := writeReq(t, srv.url(name), algo, sumFile(t, algo, filepath.Join(dir, name)), target)
			res, err := Write(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != formats[name] || res.Size != int64(len(data)) || res.Checksum.Algo != algo {
				t.Errorf("result %+v", res)
			}
			if got, want := fileSHA(t, target, int64(len(data))), fileSHA(t, raw, int64(len(data))); got != want {
				t.Errorf("disk sha256 %s, want %s", got, want)
			}
		})
	}
}

// TestResumeAfterDrop cuts the connection several times mid-stream: the
// download resumes with Range requests and the disk is still byte-exact.
func TestResumeAfterDrop(t *testing.T) {
	needTool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 16*mib, 16*mib)
	qemuImg(t, "convert", "-c", "-O", "qcow2", raw, filepath.Join(dir, "disk.qcow2"))
	for _, name := range []string{"disk.raw", "disk.qcow2"} {
		t.Run(name, func(t *testing.T) {
			srv := newImageServer(t, dir)
			srv.dropAfter = 3*mib + 777
			srv.drops.Store(4)
			target := filepath.Join(t.TempDir(), "disk")
			makeTarget(t, target, 16*mib)
			req := writeReq(t, srv.url(name), "sha256", sumFile(t, "sha256", filepath.Join(dir, name)), target)
			if _, err := Write(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got, want := fileSHA(t, target, 16*mib), fileSHA(t, raw, 16*mib); got != want {
				t.Errorf("disk sha256 %s, want %s", got, want)
			}
			if srv.dropped.Load() == 0 {
				t.Error("the server never dropped a connection")
			}
			resumed := 0
			for _, r := range srv.requests {
				if strings.HasPrefix(r, "bytes=") && !strings.HasPrefix(r, "bytes=0-") && strings.HasSuffix(r, "-") {
					resumed++ // an open-ended range from the middle: a resumed stream
				}
			}
			if name == "disk.raw" && resumed == 0 {
				t.Errorf("requests %q: the stream was not resumed with a Range request", srv.requests)
			}
		})
	}
}

// TestRefused: images that must not be written, and what the disk looks like
// afterwards.
func TestRefused(t *testing.T) {
	needTool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 8*mib, 8*mib)
	qemuImg(t, "convert", "-O", "qcow2", raw, filepath.Join(dir, "good.qcow2"))
	qemuImg(t, "create", "-q", "-f", "qcow2", "-b", raw, "-F", "raw", filepath.Join(dir, "backing.qcow2"))
	qemuImg(t, "create", "-q", "-f", "qcow2", "-o", "data_file="+filepath.Join(dir, "data.bin"), filepath.Join(dir, "datafile.qcow2"), "8M")
	// qemu-img times its LUKS key derivation with the thread's CPU clock and
	// fails with "Unable to get accurate CPU usage" when that clock does not
	// seem to advance: now and then here, on every try on some CI machines.
	// Then the real LUKS image is left out; the header-level case below still
	// covers encryption.
	luks := false
	for i := 0; i < 5 && !luks; i++ {
		out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "--object", "secret,id=s0,data=pw", "-o", "encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=10", filepath.Join(dir, "luks.qcow2"), "8M").CombinedOutput()
		if err != nil {
			t.Logf("qemu-img create a LUKS image, try %d: %v: %s", i+1, err, bytes.TrimSpace(out))
		}
		luks = err == nil
	}
	good, _ := os.ReadFile(filepath.Join(dir, "good.qcow2"))
	os.WriteFile(filepath.Join(dir, "truncated.qcow2"), good[:len(good)/2], 0o644)
	aes := bytes.Clone(good)
	binary.BigEndian.PutUint32(aes[32:], 1) // crypt_method 1: legacy AES
	os.WriteFile(filepath.Join(dir, "aes.qcow2"), aes, 0o644)
	l1 := bytes.Clone(good)
	binary.BigEndian.PutUint64(l1[40:], uint64(len(good))+1<<20) // L1 past the end
	os.WriteFile(filepath.Join(dir, "l1past.qcow2"), l1, 0o644)
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write(good)
	z.Close()
	os.WriteFile(filepath.Join(dir, "qcow2.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "disk.vmdk"), append([]byte("KDMV"), make([]byte, 4096)...), 0o644)

	srv := newImageServer(t, dir)
	cases := []struct {
		name, file string
		diskSize   int64
		sum        string
		want       string
		scrubbed   bool // first/last MiB zeroed, else untouched
	}{
		{name: "backing file", file: "backing.qcow2", want: "backing file"},
		{name: "data file", file: "datafile.qcow2", want: "external data file"},
		{name: "encrypted LUKS", file: "luks.qcow2", want: "encrypted"},
		{name: "encrypted AES", file: "aes.qcow2", want: "encrypted (method 1)"},
		{name: "truncated", file: "truncated.qcow2", want: "outside the"},
		{name: "L1 past end", file: "l1past.qcow2", want: "L1 table"},
		{name: "qcow2 in gzip", file: "qcow2.gz", want: "qcow2 inside gzip"},
		{name: "vmdk", file: "disk.vmdk", want: "vmdk images are not supported"},
		{name: "404", file: "missing.raw", sum: strings.Repeat("0", 64), want: "404"},
		{name: "qcow2 too small disk", file: "good.qcow2", diskSize: 7 * mib, want: "holds"},
		{name: "raw too small disk", file: "disk.raw", diskSize: 7 * mib, want: "holds"},
		{name: "checksum mismatch raw", file: "disk.raw", sum: strings.Repeat("ab", 32), want: "mismatch", scrubbed: true},
		{name: "checksum mismatch qcow2", file: "good.qcow2", sum: strings.Repeat("ab", 32), want: "mismatch", scrubbed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.file == "luks.qcow2" && !luks {
				t.Skip("qemu-img could not create a LUKS image here (see above)")
			}
			size := tc.diskSize
			if size == 0 {
				size = 16 * mib
			}
			target := filepath.Join(t.TempDir(), "disk")
			makeTarget(t, target, size)
			sum := tc.sum
			if sum == "" {
				sum = sumFile(t, "sha256", filepath.Join(dir, tc.file))
			}
			_, err := Write(context.Background(), writeReq(t, srv.url(tc.file), "sha256", sum, target))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			if tc.scrubbed {
				var me *ChecksumMismatchError
				if !errors.As(err, &me) || me.Expected != sum || me.Actual != sumFile(t, "sha256", filepath.Join(dir, tc.file)) {
					t.Errorf("error %v does not carry expected and actual checksums", err)
				}
			}
			for _, off := range []int64{0, size - mib} {
				b := readAt(t, target, off, mib)
				wantByte := byte(0xAA)
				if tc.scrubbed {
					wantByte = 0
				}
				if !bytes.Equal(b, bytes.Repeat([]byte{wantByte}, mib)) {
					t.Errorf("MiB at %d is not all %#x", off, wantByte)
				}
			}
		})
	}
}

// TestFileURL: file:// only under the allowed directory, symlinks resolved.
func TestFileURL(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "images")
	os.Mkdir(allowed, 0o755)
	raw := filepath.Join(allowed, "disk.raw")
	makeRaw(t, raw, 4*mib, 3*mib)
	outside := filepath.Join(dir, "secret.raw")
	makeRaw(t, outside, 2*mib, 2*mib)
	os.Symlink(outside, filepath.Join(allowed, "link.raw"))
	target := filepath.Join(dir, "disk")
	makeTarget(t, target, 8*mib)

	req := writeReq(t, "file://"+raw, "sha256", sumFile(t, "sha256", raw), target)
	if _, err := Write(context.Background(), req); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("file:// without an allowed dir: %v", err)
	}
	req.AllowedFileDir = allowed
	if _, err := Write(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSHA(t, target, 4*mib), fileSHA(t, raw, 4*mib); got != want {
		t.Errorf("disk sha256 %s, want %s", got, want)
	}
	for _, u := range []string{"file://" + filepath.Join(allowed, "link.raw"), "file://" + allowed + "/../secret.raw"} {
		req := writeReq(t, u, "sha256", sumFile(t, "sha256", outside), target)
		req.AllowedFileDir = allowed
		if _, err := Write(context.Background(), req); err == nil || !strings.Contains(err.Error(), "outside the allowed") {
			t.Errorf("%s: %v, want refused as outside", u, err)
		}
	}
}

// TestChecksumFileURL resolves the checksum from a sha256sum-style file.
func TestChecksumFileURL(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 4*mib, 3*mib)
	sums := "0000000000000000000000000000000000000000000000000000000000000000  other.raw\n" +
		sumFile(t, "sha256", raw) + " *disk.raw\n"
	os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644)
	srv := newImageServer(t, dir)
	target := filepath.Join(dir, "disk")
	makeTarget(t, target, 4*mib)
	req := writeReq(t, srv.url("disk.raw"), "", srv.url("SHA256SUMS"), target)
	res, err := Write(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checksum.Value != sumFile(t, "sha256", raw) {
		t.Errorf("checksum %v", res.Checksum)
	}
}
