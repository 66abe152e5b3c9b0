package boot

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func newFilesServer(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "boot")
	must(t, os.MkdirAll(filepath.Join(dir, "isos"), 0o755))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	must(t, os.WriteFile(filepath.Join(dir, "kiln-agent.kernel"), data, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "isos", "node1.iso"), []byte("iso"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(parent, "secret"), []byte("secret"), 0o644))
	must(t, os.Symlink(filepath.Join(parent, "secret"), filepath.Join(dir, "escape")))
	must(t, os.Symlink("kiln-agent.kernel", filepath.Join(dir, "current.kernel")))
	h, err := NewFileServer(dir)
	must(t, err)
	srv := httptest.NewServer(http.StripPrefix("/boot/files", h))
	t.Cleanup(srv.Close)
	return srv, data
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFileServerRange(t *testing.T) {
	srv, data := newFilesServer(t)
	for _, tc := range []struct {
		rng       string
		status    int
		from, end int // expected bytes data[from:end]
	}{
		{"", 200, 0, len(data)},
		{"bytes=0-99", 206, 0, 100},
		{"bytes=1000-1999", 206, 1000, 2000},
		{"bytes=-10", 206, len(data) - 10, len(data)},
		{"bytes=1048000-", 206, 1048000, len(data)},
		{"bytes=2000000-", 416, 0, 0},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/boot/files/kiln-agent.kernel", nil)
		if tc.rng != "" {
			req.Header.Set("Range", tc.rng)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("Range %q: status %d, want %d", tc.rng, resp.StatusCode, tc.status)
			continue
		}
		if tc.status < 300 && !bytes.Equal(body, data[tc.from:tc.end]) {
			t.Errorf("Range %q: got %d bytes, want data[%d:%d]", tc.rng, len(body), tc.from, tc.end)
		}
		if tc.status == 206 && resp.Header.Get("Content-Range") == "" {
			t.Errorf("Range %q: no Content-Range", tc.rng)
		}
	}
}

func TestFileServerRefuses(t *testing.T) {
	srv, _ := newFilesServer(t)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/boot/files/isos/node1.iso", 200},
		{"/boot/files/current.kernel", 200}, // symlink inside the directory
		{"/boot/files/missing", 404},
		{"/boot/files/isos", 404}, // directories are not listed
		{"/boot/files/", 400},     // nor is the root
		{"/boot/files/.hidden", 400},
		{"/boot/files/escape", 404}, // symlink out of the directory
		{"/boot/files/../secret", 400},
		{"/boot/files/isos/../../secret", 400},
		{"/boot/files/%2e%2e/secret", 400},
		{"/boot/files/..%2fsecret", 400},
		{"/boot/files/a%5c..%5csecret", 400},
	} {
		// Send the path as is: the client must not clean it.
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.URL.Opaque = tc.path
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		if bytes.Contains(body, []byte("secret")) {
			t.Errorf("%s: served the file outside the directory", tc.path)
		}
	}
}

func TestFileServerHead(t *testing.T) {
	srv, data := newFilesServer(t)
	resp, err := http.Head(srv.URL + "/boot/files/kiln-agent.kernel")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(data)) || resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("HEAD: %d, length %d, Accept-Ranges %q", resp.StatusCode, resp.ContentLength, resp.Header.Get("Accept-Ranges"))
	}
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"/a", "/../x", "/a/./b", "/a//b", "/.x", "/a\\b", "/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		name, ok := cleanName(p)
		if !ok {
			return
		}
		if !filepath.IsLocal(name) {
			t.Fatalf("cleanName(%q) = %q, not local", p, name)
		}
	})
}
