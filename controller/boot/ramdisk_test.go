package boot

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnhq/kiln/internal/syspath"
)

type mapNetworkData struct {
	data  map[string][]byte
	calls atomic.Int32
}

func (m *mapNetworkData) NetworkData(_ context.Context, node string) ([]byte, error) {
	m.calls.Add(1)
	if node == "broken" {
		return nil, errors.New("database on fire")
	}
	d, ok := m.data[node]
	if !ok {
		return nil, fmt.Errorf("node %s: %w", node, ErrUnknownNode)
	}
	return d, nil
}

const nmstateDoc = "interfaces:\n- name: eno1\n  type: ethernet\n  ipv4:\n    address:\n    - {ip: 192.0.2.10, prefix-length: 24}\n"

func rget(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRamdiskHandler(t *testing.T) {
	dir := t.TempDir()
	// An odd size, so the appended archive needs padding.
	orig := make([]byte, 3<<20+3)
	rand.Read(orig)
	rd := filepath.Join(dir, "kiln-agent.initramfs")
	if err := os.WriteFile(rd, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	b := &mapNetworkData{data: map[string][]byte{"static": []byte(nmstateDoc), "static2": []byte(nmstateDoc), "dhcp": nil}}
	srv := httptest.NewServer(http.StripPrefix("/boot/ramdisk", NewRamdiskHandler(RamdiskConfig{Ramdisk: rd}, b)))
	defer srv.Close()
	base := srv.URL + "/boot/ramdisk/"

	// Without network data: the original bytes.
	resp := rget(t, base+"dhcp")
	if got := body(t, resp); resp.StatusCode != 200 || !bytes.Equal(got, orig) {
		t.Fatalf("dhcp node: %d, %d bytes", resp.StatusCode, len(got))
	}

	resp = rget(t, base+"static")
	got := body(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("static node: %d", resp.StatusCode)
	}
	if !bytes.Equal(got[:len(orig)], orig) {
		t.Fatal("the served ramdisk does not start with the original bytes")
	}
	pad := padTo4(int64(len(orig)))
	if pad != 1 || !bytes.Equal(got[len(orig):len(orig)+int(pad)], make([]byte, pad)) {
		t.Fatalf("padding: %d bytes %x", pad, got[len(orig):len(orig)+int(pad)])
	}
	tail := got[len(orig)+int(pad):]
	if !bytes.HasPrefix(tail, []byte("070701")) {
		t.Fatalf("appended archive is not newc: %q", tail[:min(len(tail), 16)])
	}
	if resp.ContentLength != int64(len(got)) {
		t.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(got))
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Error("no ETag")
	}

	// Read the archive back with GNU cpio.
	if _, err := syspath.LookPath("cpio"); err != nil {
		t.Logf("cpio not installed (%v): archive checked by prefix only", err)
	} else {
		arch := filepath.Join(dir, "tail.cpio")
		os.WriteFile(arch, tail, 0o644)
		list := cpioRun(t, dir, arch, "-t")
		if strings.Fields(list)[0] != "etc" || !strings.Contains(list, "etc/kiln\n") || !strings.Contains(list, NetworkDataPath+"\n") {
			t.Errorf("cpio -t:\n%s", list)
		}
		out := filepath.Join(dir, "out")
		os.Mkdir(out, 0o755)
		cpioRun(t, out, arch, "-i", "-d", "--no-absolute-filenames")
		data, err := os.ReadFile(filepath.Join(out, NetworkDataPath))
		if err != nil || string(data) != nmstateDoc {
			t.Errorf("extracted %q, %v", data, err)
		}
		if st, err := os.Stat(filepath.Join(out, NetworkDataPath)); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("mode %v", st.Mode())
		}
	}

	// Range requests over the seam between the ramdisk and the archive.
	resp = rget(t, base+"static", "Range", fmt.Sprintf("bytes=%d-%d", len(orig)-2, len(orig)+10))
	if r := body(t, resp); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(r, got[len(orig)-2:len(orig)+11]) {
		t.Errorf("range over the seam: %d %x", resp.StatusCode, r)
	}
	// Conditional GET with the ETag.
	resp = rget(t, base+"static", "If-None-Match", etag)
	body(t, resp)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	// Same data, another node: same bytes, and the archive came from the cache.
	h := NewRamdiskHandler(RamdiskConfig{Ramdisk: rd}, b).(*ramdiskHandler)
	for _, n := range []string{"static", "static2", "static"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+n, nil))
		if !bytes.Equal(rec.Body.Bytes(), got) {
			t.Errorf("%s: different bytes", n)
		}
	}
	if len(h.cache) != 1 {
		t.Errorf("%d cached archives for one document", len(h.cache))
	}
	// Changed data changes the ETag.
	b.data["static"] = []byte(nmstateDoc + "# changed\n")
	resp = rget(t, base+"static", "If-None-Match", etag)
	if r := body(t, resp); resp.StatusCode != 200 || bytes.Equal(r, got) {
		t.Errorf("changed data: %d", resp.StatusCode)
	}

	for _, tc := range []struct {
		path string
		code int
	}{
		{"nobody", 404}, {"broken", 503}, {"a/b", 400}, {"..", 400}, {"", 400},
	} {
		resp := rget(t, base+tc.path)
		body(t, resp)
		if resp.StatusCode != tc.code {
			t.Errorf("%q: %d, want %d", tc.path, resp.StatusCode, tc.code)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, base+"static", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %v %v", resp, err)
	}
}

func cpioRun(t *testing.T, dir, archive string, args ...string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("cpio", append(args, "--quiet")...)
	cmd.Dir, cmd.Stdin = dir, f
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestConcatReaderAt(t *testing.T) {
	c := &concatReaderAt{parts: []readerAtSize{{strings.NewReader("abc"), 3}, {zeroReaderAt{}, 2}, {strings.NewReader("de"), 2}}}
	full := "abc\x00\x00de"
	for off := 0; off <= len(full); off++ {
		for n := 0; n <= len(full)-off+1; n++ {
			p := make([]byte, n)
			m, err := c.ReadAt(p, int64(off))
			want := full[off:min(off+n, len(full))]
			if string(p[:m]) != want {
				t.Fatalf("ReadAt(%d, %d) = %q, want %q", n, off, p[:m], want)
			}
			if (m < n) != (err == io.EOF) {
				t.Fatalf("ReadAt(%d, %d): n=%d err=%v", n, off, m, err)
			}
		}
	}
}
