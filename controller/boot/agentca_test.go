package boot

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/u-root/u-root/pkg/cpio"
)

// archived is one regular file read back from an archive.
type archived struct {
	perm uint64
	data string
}

// readArchive lists the regular files of a newc archive.
func readArchive(t *testing.T, b []byte) map[string]*archived {
	t.Helper()
	rr := cpio.Newc.Reader(bytes.NewReader(b))
	files := map[string]*archived{}
	for {
		rec, err := rr.ReadRecord()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Mode&cpio.S_IFMT == cpio.S_IFREG {
			data, err := io.ReadAll(io.NewSectionReader(rec.ReaderAt, 0, int64(rec.FileSize)))
			if err != nil {
				t.Fatal(err)
			}
			files[rec.Name] = &archived{perm: rec.Mode & 0o777, data: string(data)}
		}
	}
}

func TestBootFilesArchive(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	for _, tc := range []struct {
		name      string
		net, ca   []byte
		wantFiles map[string]os.FileMode
	}{
		{"network data only", []byte(nmstateDoc), nil, map[string]os.FileMode{NetworkDataPath: 0o600}},
		{"CA only", nil, ca, map[string]os.FileMode{AgentCAPath: 0o644}},
		{"both", []byte(nmstateDoc), ca, map[string]os.FileMode{NetworkDataPath: 0o600, AgentCAPath: 0o644}},
	} {
		b, err := BootFilesArchive(tc.net, tc.ca)
		if err != nil {
			t.Fatal(err)
		}
		files := readArchive(t, b)
		if len(files) != len(tc.wantFiles) {
			t.Errorf("%s: files %v", tc.name, files)
		}
		for name, mode := range tc.wantFiles {
			h := files[name]
			if h == nil || h.perm != uint64(mode) {
				t.Errorf("%s: %s missing or wrong mode: %+v", tc.name, name, h)
				continue
			}
			want := tc.ca
			if name == NetworkDataPath {
				want = tc.net
			}
			if h.data != string(want) {
				t.Errorf("%s: %s holds %q", tc.name, name, h.data)
			}
		}
	}
}

// TestRamdiskHandlerAgentCA: with an agent CA, every node's ramdisk carries
// it, a node without network data included, and the ETag changes with it.
func TestRamdiskHandlerAgentCA(t *testing.T) {
	dir := t.TempDir()
	rd := filepath.Join(dir, "kiln-agent.initramfs")
	if err := os.WriteFile(rd, []byte("BASE"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &mapNetworkData{data: map[string][]byte{"static": []byte(nmstateDoc), "dhcp": nil}}
	etags := map[string]bool{}
	for _, ca := range []string{"CA-ONE\n", "CA-TWO\n"} {
		srv := httptest.NewServer(http.StripPrefix("/boot/ramdisk", NewRamdiskHandler(RamdiskConfig{Ramdisk: rd, AgentCA: []byte(ca)}, b)))
		for _, node := range []string{"dhcp", "static"} {
			resp := rget(t, srv.URL+"/boot/ramdisk/"+node)
			got := body(t, resp)
			if resp.StatusCode != 200 || !bytes.HasPrefix(got, []byte("BASE")) {
				t.Fatalf("%s: %d %q", node, resp.StatusCode, got)
			}
			files := readArchive(t, got[4:])
			if files[AgentCAPath] == nil || files[AgentCAPath].data != ca {
				t.Errorf("%s: no CA %q in %v", node, ca, files)
			}
			if (files[NetworkDataPath] != nil) != (node == "static") {
				t.Errorf("%s: network data present = %v", node, files[NetworkDataPath] != nil)
			}
			etags[resp.Header.Get("ETag")] = true
		}
		srv.Close()
	}
	if len(etags) != 4 {
		t.Errorf("ETags not distinct per node and CA: %v", etags)
	}
}
