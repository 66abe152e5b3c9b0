package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

type fakeBackend map[string]Decision

func (f fakeBackend) BootFor(_ context.Context, mac string) (Decision, error) {
	if mac == "de:ad:00:00:00:01" {
		return Decision{}, errors.New("database is down")
	}
	d, ok := f[mac]
	if !ok {
		return Decision{}, fmt.Errorf("port %s: %w", mac, ErrUnknownMAC)
	}
	return d, nil
}

var testBackend = fakeBackend{
	"aa:bb:cc:dd:ee:01": {Action: BootAgent, NodeUUID: "n1"},
	"aa:bb:cc:dd:ee:02": {Action: BootLocal, NodeUUID: "n2"},
	"aa:bb:cc:dd:ee:03": {Action: BootAgent, NodeUUID: "n3",
		KernelURL: "http://img/custom.kernel", RamdiskURL: "http://img/custom.initramfs",
		ExtraKernelArgs: []string{"ipa-debug=1"}},
	"aa:bb:cc:dd:ee:04": {Action: BootAgent, NodeUUID: "n4", ExtraKernelArgs: []string{"a b"}},
	"aa:bb:cc:dd:ee:05": {Action: "reboot-into-space", NodeUUID: "n5"},
	"aa:bb:cc:dd:ee:06": {Action: BootAgent, NodeUUID: "n6", Inspect: true},
}

var testConfig = Config{
	APIURL:          "http://ctrl:6385",
	KernelURL:       "http://ctrl:6385/boot/files/kiln-agent.kernel",
	RamdiskURL:      "http://ctrl:6385/boot/files/kiln-agent.initramfs",
	Console:         "ttyS0,115200n8",
	ExtraKernelArgs: []string{"quiet"},
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestScriptHandler(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unknown  Action
		query    string
		status   int
		contains []string
		golden   string
	}{
		{name: "known agent", query: "?mac=AA:BB:CC:DD:EE:01", status: 200, golden: "handler-agent.ipxe",
			contains: []string{"BOOTIF=01-aa-bb-cc-dd-ee-01", "ipa-api-url=http://ctrl:6385", "initrd=ramdisk",
				"kernel --name kernel http://ctrl:6385/boot/files/kiln-agent.kernel ",
				"initrd --name ramdisk http://ctrl:6385/boot/files/kiln-agent.initramfs "}},
		{name: "hyphen mac", query: "?mac=aa-bb-cc-dd-ee-01", status: 200, contains: []string{"BOOTIF=01-aa-bb-cc-dd-ee-01"}},
		{name: "known local", query: "?mac=aa:bb:cc:dd:ee:02", status: 200, contains: []string{"sanboot", "exit"}},
		{name: "driver_info kernel", query: "?mac=aa:bb:cc:dd:ee:03", status: 200,
			contains: []string{"kernel --name kernel http://img/custom.kernel ", "initrd --name ramdisk http://img/custom.initramfs",
				"quiet ipa-debug=1"}},
		{name: "unknown default local", query: "?mac=11:22:33:44:55:66", status: 200, contains: []string{"sanboot"}},
		{name: "unknown discovery", unknown: Discovery, query: "?mac=11:22:33:44:55:66", status: 200,
			contains: []string{"BOOTIF=01-11-22-33-44-55-66", "kiln-agent.kernel",
				"ipa-inspection-callback-url=http://ctrl:6385/v1/continue_inspection"}, golden: "handler-discovery.ipxe"},
		{name: "known node inspecting", query: "?mac=aa:bb:cc:dd:ee:06", status: 200,
			contains: []string{"BOOTIF=01-aa-bb-cc-dd-ee-06", "ipa-inspection-callback-url=http://ctrl:6385/v1/continue_inspection"}},
		{name: "no mac chains", query: "", status: 200, contains: []string{"chain --autofree boot.ipxe?mac=${netX/mac:hexhyp}"}},
		{name: "malformed mac", query: "?mac=aa:bb:cc", status: 400},
		{name: "unexpanded ipxe var", query: "?mac=" + url.QueryEscape("${net0/mac}"), status: 400},
		{name: "two macs", query: "?mac=aa:bb:cc:dd:ee:01&mac=aa:bb:cc:dd:ee:02", status: 400},
		{name: "backend down", query: "?mac=de:ad:00:00:00:01", status: 503},
		{name: "unsafe arg", query: "?mac=aa:bb:cc:dd:ee:04", status: 503},
		{name: "unknown action", query: "?mac=aa:bb:cc:dd:ee:05", status: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig
			cfg.Unknown = tc.unknown
			srv := httptest.NewServer(NewScriptHandler(cfg, testBackend))
			defer srv.Close()
			status, body := get(t, srv, "/boot.ipxe"+tc.query)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body:\n%s", status, tc.status, body)
			}
			if status == 200 && !strings.HasPrefix(body, "#!ipxe\n") {
				t.Errorf("body is not an iPXE script:\n%s", body)
			}
			for _, c := range tc.contains {
				if !strings.Contains(body, c) {
					t.Errorf("body lacks %q:\n%s", c, body)
				}
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, body)
			}
		})
	}
}

func TestScriptHandlerNoDefaults(t *testing.T) {
	srv := httptest.NewServer(NewScriptHandler(Config{APIURL: "http://ctrl"}, testBackend))
	defer srv.Close()
	if status, body := get(t, srv, "/boot.ipxe?mac=aa:bb:cc:dd:ee:01"); status != 503 {
		t.Fatalf("agent boot without a kernel: status %d, body %q", status, body)
	}
}

func TestScriptHandlerMethod(t *testing.T) {
	srv := httptest.NewServer(NewScriptHandler(testConfig, testBackend))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/boot.ipxe?mac=aa:bb:cc:dd:ee:01", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: status %d", resp.StatusCode)
	}
}
