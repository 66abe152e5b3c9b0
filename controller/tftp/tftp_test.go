package tftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pin/tftp/v3"
)

// testDir makes an iPXE directory of random files, a subdirectory and a
// symlink that points out of it.
func testDir(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{}
	for name, size := range map[string]int{"undionly.kpxe": 70_001, "snponly.efi": 4096, "empty": 0, "sub/x.efi": 1000} {
		b := make([]byte, size)
		rand.Read(b)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	return dir, files
}

// statsHook hands each finished transfer's statistics to the test.
type statsHook chan tftp.TransferStats

func (h statsHook) OnSuccess(s tftp.TransferStats)          { h <- s }
func (h statsHook) OnFailure(s tftp.TransferStats, _ error) {}

func startTFTP(t *testing.T, dir string) (string, statsHook) {
	t.Helper()
	s, err := New(Config{Dir: dir, Interface: "lo", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hook := make(statsHook, 16)
	s.srv.SetHook(hook)
	if err := s.Listen(); err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("binding to an interface needs root: %v", err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s.Addr().String(), hook
}

func TestTFTPRead(t *testing.T) {
	dir, files := testDir(t)
	addr, hook := startTFTP(t, dir)
	for _, tc := range []struct {
		name    string
		file    string
		blksize int  // 0: the default 512
		tsize   bool // ask for the size first
		want    string
		packets int // packets the server sent: DATA, and the OACK when it took options
	}{
		{"default block size", "undionly.kpxe", 0, false, "undionly.kpxe", 137},
		{"blksize 1428 and tsize", "undionly.kpxe", 1428, true, "undionly.kpxe", 1 + 50},
		{"leading slash", "/snponly.efi", 1024, true, "snponly.efi", 1 + 5}, // 4096/1024: 4 full blocks and an empty one
		{"empty file", "empty", 0, true, "empty", 1},                        // the library announces no tsize of 0: no OACK
		{"subdirectory", "sub/x.efi", 0, false, "sub/x.efi", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tftp.NewClient(addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetTimeout(5 * time.Second)
			if tc.blksize != 0 {
				c.SetBlockSize(tc.blksize)
			}
			c.RequestTSize(tc.tsize)
			wt, err := c.Receive(tc.file, "octet")
			if err != nil {
				t.Fatal(err)
			}
			want := files[tc.want]
			if tc.tsize {
				n, ok := wt.(tftp.IncomingTransfer).Size()
				if !ok || n != int64(len(want)) {
					t.Fatalf("tsize %d (%v), want %d", n, ok, len(want))
				}
			}
			var got bytes.Buffer
			if _, err := wt.WriteTo(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("got %d bytes, not the file's %d", got.Len(), len(want))
			}
			st := <-hook
			if st.DatagramsSent != tc.packets {
				t.Fatalf("server sent %d packets, want %d (block size %d)", st.DatagramsSent, tc.packets, tc.blksize)
			}
		})
	}
}

func TestTFTPRefuses(t *testing.T) {
	dir, _ := testDir(t)
	addr, _ := startTFTP(t, dir)
	c, err := tftp.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(5 * time.Second)
	for _, name := range []string{"missing.efi", "../" + filepath.Base(dir) + "/empty", "sub", "escape", "sub/../../x", ""} {
		if wt, err := c.Receive(name, "octet"); err == nil {
			n, _ := wt.WriteTo(io.Discard)
			t.Errorf("read of %q allowed (%d bytes)", name, n)
		}
	}
	rf, err := c.Send("new.efi", "octet")
	if err == nil {
		_, err = rf.ReadFrom(bytes.NewReader([]byte("x")))
	}
	if err == nil {
		t.Error("a write was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "new.efi")); err == nil {
		t.Error("a write created a file")
	}
}

func TestHTTPHandler(t *testing.T) {
	dir, files := testDir(t)
	h, err := HTTPHandler(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/boot/ipxe", h))
	defer srv.Close()
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/boot/ipxe/snponly.efi", 200}, {"/boot/ipxe/sub/x.efi", 200}, {"/boot/ipxe/", 404}, {"/boot/ipxe/sub", 404},
		{"/boot/ipxe/escape", 404}, {"/boot/ipxe/missing", 404}, {"/boot/ipxe/%2e%2e/x", 404},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Fatalf("%s: %d, want %d", tc.path, resp.StatusCode, tc.code)
		}
		if tc.code == 200 && !bytes.Equal(body, files[tc.path[len("/boot/ipxe/"):]]) {
			t.Fatalf("%s: wrong content", tc.path)
		}
	}
}

func TestMissing(t *testing.T) {
	dir, _ := testDir(t)
	got := Missing(dir, []string{"undionly.kpxe", "ipxe.efi", "sub", "snponly.efi"})
	if len(got) != 2 || got[0] != "ipxe.efi" || got[1] != "sub" {
		t.Fatalf("missing %v, want [ipxe.efi sub]", got)
	}
}
