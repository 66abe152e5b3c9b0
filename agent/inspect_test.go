package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// inspector records inspection posts and answers them from a script of
// statuses (202 with the node UUID once the script runs out).
type inspector struct {
	mu       sync.Mutex
	srv      *httptest.Server
	statuses []int
	paths    []string
	bodies   []map[string]json.RawMessage
	versions []string
}

func newInspector(t *testing.T, statuses ...int) *inspector {
	in := &inspector{statuses: statuses}
	in.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		if r.Method != http.MethodPost || json.Unmarshal(b, &m) != nil {
			w.WriteHeader(400)
			return
		}
		in.mu.Lock()
		n := len(in.paths)
		in.paths = append(in.paths, r.URL.Path)
		in.bodies = append(in.bodies, m)
		in.versions = append(in.versions, r.Header.Get(microversionHeader))
		st := 202
		if n < len(in.statuses) {
			st = in.statuses[n]
		}
		in.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		if st == 202 || st == 200 {
			io.WriteString(w, `{"uuid":"`+testNode+`"}`)
		} else {
			io.WriteString(w, `{"error":{"message":"no"}}`)
		}
	}))
	t.Cleanup(in.srv.Close)
	return in
}

// TestInspectionURL: where inspection data goes, as IPA decides it.
func TestInspectionURL(t *testing.T) {
	for _, c := range []struct {
		name, callback, api string
		collectors          []string
		want                string
	}{
		{"ironic-inspector (Ironic 2023.1)", "http://insp:5050/v1/continue", "http://ironic:6385", nil, "http://insp:5050/v1/continue"},
		{"built-in inspection (Ironic ≥ 2023.2)", "http://ironic:6385/v1/continue_inspection", "", []string{"default"}, "http://ironic:6385/v1/continue_inspection"},
		{"collectors named, no callback", "", "http://ironic:6385/", []string{"default", "logs"}, "http://ironic:6385/v1/continue_inspection"},
		{"no callback, no collectors", "", "http://ironic:6385", nil, ""},
		{"collectors but no API", "", "", []string{"default"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newTestAgent(t, nil, RealClock, func(cfg *Config, _ *Deps) {
				cfg.InspectionCallbackURL, cfg.APIURL, cfg.InspectionCollectors = c.callback, c.api, c.collectors
			})
			if got := a.inspectionURL(); got != c.want {
				t.Fatalf("inspection URL %q, want %q", got, c.want)
			}
		})
	}
}

const dmiSample = `# dmidecode 3.4
Getting SMBIOS data from sysfs.
SMBIOS 2.8 present.

Handle 0x0000, DMI type 0, 24 bytes
BIOS Information
	Vendor: SeaBIOS
	Version: 1.16.2-debian-1.16.2-1
	Release Date: 04/01/2014
	Characteristics:
		BIOS characteristics not supported
		Targeted content distribution is supported

Handle 0x0400, DMI type 4, 42 bytes
Processor Information
	Socket Designation: CPU 0
	Type: Central Processor
	Core Count: 2

Handle 0x1000, DMI type 16, 23 bytes
Physical Memory Array
	Location: Other
	Maximum Capacity: 2 GB
	Number Of Devices: 1

Handle 0x1001, DMI type 16, 23 bytes
Physical Memory Array
	Location: Other
	Number Of Devices: 2

Handle 0x1100, DMI type 17, 40 bytes
Memory Device
	Size: 2 GB
	Locator: DIMM 0

Handle 0x1300, DMI type 19, 31 bytes
Memory Array Mapped Address
	Starting Address: 0x00000000000
`

func TestParseDMIDecode(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{"qemu tables", dmiSample, `{"bios":{"Characteristics":["BIOS characteristics not supported","Targeted content distribution is supported"],` +
			`"Handle":"Handle 0x0000, DMI type 0, 24 bytes","Release Date":"04/01/2014","Vendor":"SeaBIOS","Version":"1.16.2-debian-1.16.2-1"},` +
			`"cpu":[{"Core Count":"2","Handle":"Handle 0x0400, DMI type 4, 42 bytes","Socket Designation":"CPU 0","Type":"Central Processor"}],` +
			`"memory":{"Location":"Other","Maximum Capacity":"2 GB","Number Of Devices":3,` +
			`"devices":[{"Handle":"Handle 0x1100, DMI type 17, 40 bytes","Locator":"DIMM 0","Size":"2 GB"}]}}`, ""},
		{"nothing", "# dmidecode 3.4\n", `{"bios":{},"cpu":[],"memory":{"devices":[]}}`, ""},
		{"bad device count", "Handle 0x1000, DMI type 16, 23 bytes\nPhysical Memory Array\n\tNumber Of Devices: many\n", "", `Number Of Devices "many"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDMIDecode(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if string(b) != c.want {
				t.Fatalf("got  %s\nwant %s", b, c.want)
			}
		})
	}
}

// fakePCI writes a sysfs-like PCI device tree.
func fakePCI(t *testing.T) string {
	dir := t.TempDir()
	for bus, files := range map[string]map[string]string{
		"0000:00:01.0": {"vendor": "0x8086\n", "device": "0x7000\n", "class": "0x060100\n", "revision": "0x00\n", "numa_node": "-1\n"},
		"0000:00:03.0": {"vendor": "0x1af4\n", "device": "0x1000\n", "class": "0x020000\n"},
		"0000:00:04.0": {"vendor": "garbage\n", "device": "0x1001\n", "class": "0x010000\n"},
	} {
		if err := os.MkdirAll(filepath.Join(dir, bus), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, bus, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestInspectionCollectors posts through each of IPA's collector names and
// checks the shapes Ironic's inspection hooks and rules read.
func TestInspectionCollectors(t *testing.T) {
	insp := newInspector(t)
	a := newTestAgent(t, nil, RealClock, func(c *Config, d *Deps) {
		c.InspectionCallbackURL = insp.srv.URL + "/v1/continue"
		c.InspectionCollectors = []string{"logs", "default", "pci-devices", "dmi-decode", "lldp", "numa-topology"}
		d.Inventory = func(context.Context) (any, error) {
			return map[string]any{
				"interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:00:12:34:56"}},
				"disks": []any{
					map[string]any{"name": "/dev/sda", "size": 8 << 30},
					map[string]any{"name": "/dev/sdb", "size": 1 << 30},
					map[string]any{"name": "/dev/sdc", "size": 5 << 30},
				},
				"boot": map[string]any{"pxe_interface": "52:54:00:12:34:56", "current_boot_mode": "bios"},
			}, nil
		}
		d.PCIDevicesDir = fakePCI(t)
		d.DMIDecode = func(context.Context) (string, error) { return dmiSample, nil }
		d.ListenLLDP = func(_ context.Context, ifaces []string) (map[string][]proto.LLDPTLV, error) {
			if !reflect.DeepEqual(ifaces, []string{"eth0"}) {
				return nil, errors.New("asked for " + strings.Join(ifaces, ","))
			}
			return map[string][]proto.LLDPTLV{"eth0": {{Type: 1, Value: "04525400aabbcc"}, {Type: 0, Value: ""}}}, nil
		}
	})
	uuid, err := a.inspect(context.Background())
	if err != nil || uuid != testNode {
		t.Fatalf("inspect: %q %v", uuid, err)
	}
	insp.mu.Lock()
	defer insp.mu.Unlock()
	if len(insp.bodies) != 1 || insp.paths[0] != "/v1/continue" || insp.versions[0] != "" {
		t.Fatalf("posts %v (µv %v)", insp.paths, insp.versions)
	}
	body := insp.bodies[0]
	want := map[string]string{
		"root_disk":      `{"name":"/dev/sdc","size":5368709120}`,
		"boot_interface": `"52:54:00:12:34:56"`,
		"configuration":  `{"collectors":["logs","default","pci-devices","dmi-decode","lldp","numa-topology"],"managers":[{"name":"generic_hardware_manager","version":"1.0"}]}`,
		"pci_devices": `[{"vendor_id":"8086","product_id":"7000","class":"060100","revision":"00","bus":"0000:00:01.0","numa_node_id":"-1"},` +
			`{"vendor_id":"1af4","product_id":"1000","class":"020000","revision":null,"bus":"0000:00:03.0","numa_node_id":null}]`,
		"lldp_raw": `{"eth0":[[1,"04525400aabbcc"],[0,""]]}`,
		"error":    `"The following errors were encountered:\n* collector numa-topology is not available in this agent build"`,
	}
	for k, v := range want {
		if string(body[k]) != v {
			t.Errorf("%s = %s\n want %s", k, body[k], v)
		}
	}
	var dmi map[string]json.RawMessage
	if json.Unmarshal(body["dmi"], &dmi) != nil || !strings.Contains(string(dmi["bios"]), `"Vendor":"SeaBIOS"`) {
		t.Errorf("dmi = %s", body["dmi"])
	}
	if !strings.Contains(string(body["inventory"]), `"pxe_interface":"52:54:00:12:34:56"`) {
		t.Errorf("inventory = %s", body["inventory"])
	}
	// logs: base64 tar.gz whose agent.log shows the other collectors ran first.
	var logs string
	json.Unmarshal(body["logs"], &logs)
	raw, err := base64.StdEncoding.DecodeString(logs)
	if err != nil {
		t.Fatalf("logs not base64: %v", err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("logs not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	found := false
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name == "agent.log" {
			b, _ := io.ReadAll(tr)
			found = strings.Contains(string(b), "numa-topology")
		}
	}
	if !found {
		t.Error("logs lack agent.log recording the failed collector (logs must run last)")
	}
}

// TestInspectionRetries follows IPA's schedule on the fake clock: retried on
// 409, 5xx and connection errors with 5, 5, 6, 12 s waits, at most five
// posts; any other 4xx ends inspection and the agent goes on to its lookup.
func TestInspectionRetries(t *testing.T) {
	for _, c := range []struct {
		name      string
		statuses  []int
		down      bool
		posts     int
		waits     []time.Duration
		wantUUID  string
		wantError bool
	}{
		{"accepted", nil, false, 1, nil, testNode, false},
		{"busy then accepted", []int{409, 503, 500}, false, 4, []time.Duration{5 * time.Second, 5 * time.Second, 6 * time.Second}, testNode, false},
		{"refused", []int{400}, false, 1, nil, "", false},
		{"not found", []int{404}, false, 1, nil, "", false},
		{"always failing", []int{500, 500, 500, 500, 500, 500}, false, 5, []time.Duration{5 * time.Second, 5 * time.Second, 6 * time.Second, 12 * time.Second}, "", true},
		{"unreachable", nil, true, 0, []time.Duration{5 * time.Second, 5 * time.Second, 6 * time.Second, 12 * time.Second}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			insp := newInspector(t, c.statuses...)
			url := insp.srv.URL + "/v1/continue"
			if c.down {
				insp.srv.Close()
			}
			clock := newFakeClock()
			a := newTestAgent(t, nil, clock, func(cfg *Config, d *Deps) {
				cfg.InspectionCallbackURL = url
				d.Inventory = func(context.Context) (any, error) { return map[string]any{}, nil }
			})
			type result struct {
				uuid string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				u, err := a.inspect(context.Background())
				done <- result{u, err}
			}()
			for i, w := range c.waits {
				if got := clock.waitAsked(t, i+1); got != w {
					t.Fatalf("wait %d = %s, want %s", i+1, got, w)
				}
				clock.Advance(w)
			}
			r := <-done
			if r.uuid != c.wantUUID || (r.err != nil) != c.wantError {
				t.Fatalf("inspect = %q, %v", r.uuid, r.err)
			}
			insp.mu.Lock()
			defer insp.mu.Unlock()
			if len(insp.paths) != c.posts {
				t.Fatalf("%d posts, want %d", len(insp.paths), c.posts)
			}
			clock.mu.Lock()
			defer clock.mu.Unlock()
			if len(clock.asked) != len(c.waits) {
				t.Fatalf("waited %v, want %v", clock.asked, c.waits)
			}
		})
	}
}
