package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
)

// makeRaw writes a size-byte disk image mixing random, compressible and zero
// MiBs, with data ending at dataEnd (the rest is zeros).
func makeRaw(t testing.TB, path string, size, dataEnd int64) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(size), uint64(dataEnd)))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	words := []string{"kiln ", "boot ", "disk ", "image ", "qcow2 ", "\x00\x00\x00\x00"}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < dataEnd; off += int64(len(buf)) {
		switch (off >> 20) % 4 {
		case 0: // random
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
		case 1: // compressible
			var b bytes.Buffer
			for b.Len() < len(buf) {
				b.WriteString(words[r.IntN(len(words))])
			}
			copy(buf, b.Bytes())
		case 2: // zeros
			clear(buf)
		case 3: // half random, then a zero tail inside the MiB
			for i := range buf {
				buf[i] = 0
				if i < len(buf)/2 {
					buf[i] = byte(r.Uint32())
				}
			}
		}
		n := min(int64(len(buf)), dataEnd-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func needTool(t testing.TB, name string) {
	t.Helper()
	testtool.Need(t, name)
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func qemuImg(t testing.TB, args ...string) {
	t.Helper()
	needTool(t, "qemu-img")
	run(t, "qemu-img", args...)
}

func fileSHA(t testing.TB, path string, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, n)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sumFile(t testing.TB, algo, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHash(algo)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// makeTarget makes a file target of size bytes filled with 0xAA at both ends,
// so tests can tell written, zeroed and untouched regions apart.
func makeTarget(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	mark := bytes.Repeat([]byte{0xAA}, 1<<20)
	f.WriteAt(mark, 0)
	f.WriteAt(mark, size-int64(len(mark)))
}

func readAt(t testing.TB, path string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// imageServer serves the files of dir with Range support (http.ServeContent)
// and, when dropAfter > 0, cuts each of the first drops responses' connection
// after dropAfter bytes of body.
type imageServer struct {
	*httptest.Server
	dir       string
	dropAfter int64
	drops     atomic.Int32
	dropped   atomic.Int32
	noRanges  bool
	mu        sync.Mutex
	requests  []string
}

func newImageServer(t testing.TB, dir string) *imageServer {
	s := &imageServer{dir: dir}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *imageServer) url(name string) string { return s.Server.URL + "/" + name }

func (s *imageServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Header.Get("Range"))
	s.mu.Unlock()
	f, err := os.Open(filepath.Join(s.dir, filepath.Base(r.URL.Path)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, _ := f.Stat()
	if s.dropAfter > 0 && s.drops.Add(-1) >= 0 {
		s.dropped.Add(1)
		w = &dropWriter{ResponseWriter: w, left: s.dropAfter}
	}
	if s.noRanges { // a server that ignores Range and always sends it all
		w.Header().Set("Content-Length", strinf(st.Size()))
		io.Copy(w, f)
		return
	}
	http.ServeContent(w, r, st.Name(), time.Unix(1700000000, 0), f)
}

func strinf(n int64) string { return strconv.FormatInt(n, 10) }

// dropWriter aborts the connection once left bytes of body were written.
type dropWriter struct {
	http.ResponseWriter
	left int64
}

func (d *dropWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > d.left {
		d.ResponseWriter.Write(p[:d.left])
		if f, ok := d.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	d.left -= int64(len(p))
	return d.ResponseWriter.Write(p)
}
