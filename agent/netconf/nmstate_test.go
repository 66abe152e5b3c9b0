package netconf

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bondVLANYAML is a bond of two ports with a VLAN on top: the document
// proto/nmstate's tests parse.
var bondVLANYAML = func() string {
	b, err := os.ReadFile("../../proto/nmstate/testdata/bond-vlan.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestKeyfiles(t *testing.T) {
	cfg, err := ParseNMState([]byte(bondVLANYAML))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Keyfiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"port0.nmconnection": "[connection]\nid=port0\ntype=ethernet\ninterface-name=port0\nautoconnect=true\nmaster=bond0\nslave-type=bond\n\n[ethernet]\nmac-address=52:54:00:AA:BB:01\n",
		"bond0.nmconnection": "[connection]\nid=bond0\ntype=bond\ninterface-name=bond0\nautoconnect=true\n\n[ethernet]\nmtu=1400\n\n[bond]\nmode=active-backup\nmiimon=100\n\n[ipv4]\nmethod=disabled\n\n[ipv6]\nmethod=disabled\n",
		"bond0.100.nmconnection": "[connection]\nid=bond0.100\ntype=vlan\ninterface-name=bond0.100\nautoconnect=true\n\n[vlan]\nflags=1\nid=100\nparent=bond0\n\n" +
			"[ipv4]\nmethod=manual\naddress1=10.88.0.2/24\ngateway=10.88.0.1\nroute1=198.51.100.0/24,10.88.0.1,50\ndns=10.88.0.53;\ndns-search=example.com;\n\n" +
			"[ipv6]\nmethod=manual\naddress1=fd00:88::2/64\ndns=fd00:88::53;\n",
	}
	if len(files) != 4 {
		t.Errorf("files: %d, want 4 (port0, port1, bond0, bond0.100)", len(files))
	}
	for name, w := range want {
		if got := string(files[name]); got != w {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, w)
		}
	}

	dir := filepath.Join(t.TempDir(), "system-connections")
	if err := WriteKeyfiles(dir, cfg); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("%d files written", len(ents))
	}
	for _, e := range ents {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", e.Name(), info.Mode())
		}
	}

	// Matched by MAC alone: no interface-name, so the installed system's
	// own name for the NIC does not matter.
	bym, err := ParseNMState([]byte("interfaces:\n- name: uplink\n  type: ethernet\n  identifier: mac-address\n  mac-address: 52:54:00:12:34:56\n  ipv4: {dhcp: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Keyfiles(bym)
	if got := string(f["uplink.nmconnection"]); err != nil || !strings.HasPrefix(got, "[connection]\nid=uplink\ntype=ethernet\nautoconnect=true\n\n[ethernet]\nmac-address=52:54:00:12:34:56\n") {
		t.Errorf("keyfile matched by MAC: %v\n%s", err, got)
	}

	// DHCP plus a static address, and an unreachable gateway.
	dh, _ := ParseNMState([]byte("interfaces:\n- name: e\n  type: ethernet\n  ipv4: {dhcp: true, address: [{ip: 192.0.2.5, prefix-length: 24}]}\n"))
	f, err = Keyfiles(dh)
	if err != nil || !strings.Contains(string(f["e.nmconnection"]), "[ipv4]\nmethod=auto\naddress1=192.0.2.5/24\n") {
		t.Errorf("dhcp+static: %q %v", f["e.nmconnection"], err)
	}
	bad, _ := ParseNMState([]byte("interfaces:\n- name: e\n  type: ethernet\n  ipv4: {address: [{ip: 192.0.2.5, prefix-length: 24}]}\nroutes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-address: 203.0.113.1}\n"))
	if _, err := Keyfiles(bad); err == nil || !strings.Contains(err.Error(), "no interface reaches the gateway") {
		t.Errorf("unreachable gateway: %v", err)
	}
}

func TestLoadNetworkData(t *testing.T) {
	doc := []byte("interfaces:\n- name: eno1\n  type: ethernet\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(doc)
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/nd.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write(doc)
	}))
	defer srv.Close()
	noFile := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	withFile := func(p string) ([]byte, error) {
		if p == NetworkDataFile {
			return doc, nil
		}
		return nil, fs.ErrNotExist
	}
	for _, tc := range []struct {
		name, cmdline string
		read          func(string) ([]byte, error)
		src, err      string
	}{
		{"base64", "console=ttyS0 kiln.network_data=" + base64.StdEncoding.EncodeToString(doc), noFile, "kernel command line", ""},
		{"base64 url unpadded", "kiln.network_data=" + base64.RawURLEncoding.EncodeToString(doc), noFile, "kernel command line", ""},
		{"gzip base64", "kiln.network_data=" + base64.StdEncoding.EncodeToString(gz.Bytes()), noFile, "kernel command line", ""},
		{"url", "kiln.network_data_url=" + srv.URL + "/nd.yaml", noFile, srv.URL + "/nd.yaml", ""},
		{"file", "console=ttyS0", withFile, NetworkDataFile, ""},
		{"none", "console=ttyS0", noFile, "", ""},
		{"bad base64", "kiln.network_data=!!!", noFile, "", "decode kiln.network_data"},
		{"url 404", "kiln.network_data_url=" + srv.URL + "/x", noFile, "", "404"},
		{"not http", "kiln.network_data_url=file:///etc/passwd", noFile, "", "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, src, err := LoadNetworkData(context.Background(), tc.cmdline, tc.read, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(src, tc.src) {
				t.Errorf("source %q, want %q", src, tc.src)
			}
			if tc.src == "" {
				if b != nil {
					t.Errorf("data %q without a source", b)
				}
				return
			}
			if !bytes.Equal(b, doc) {
				t.Errorf("data %q", b)
			}
		})
	}
}

func TestParseNetworkData(t *testing.T) {
	m := map[string]any{"interfaces": []any{map[string]any{"name": "e", "type": "ethernet", "ipv4": map[string]any{"dhcp": true}}}}
	cfg, err := ParseNetworkData(m)
	if err != nil || len(cfg.Interfaces) != 1 || !cfg.Interfaces[0].IPv4.DHCP {
		t.Errorf("map: %+v %v", cfg, err)
	}
	if _, err := ParseNetworkData(map[string]any{"links": []any{}, "networks": []any{}}); err == nil || !strings.Contains(err.Error(), "OpenStack") {
		t.Errorf("OpenStack layout: %v", err)
	}
	if _, err := ParseNetworkData("interfaces:\n- {name: e, type: ethernet}\n"); err != nil {
		t.Errorf("string: %v", err)
	}
}
