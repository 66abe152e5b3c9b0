package api_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// The golden tests pin every read route's answer, byte for byte, at the
// microversions clients pin (1.1 the default, 1.52, 1.82, 1.95 and the
// server's maximum), so that a change to how answers are rendered cannot
// change what clients receive. Only timestamps and UUIDs are normalised.
// Regenerate after an intended change with
//
//	go test ./controller/api -run TestGoldenReads -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden from the current answers")

const goldenDir = "testdata/golden"

// goldenVersions are the microversions each route is read at; "latest" is
// the server's maximum.
var goldenVersions = []string{"1.1", "1.52", "1.82", "1.95", "latest"}

const (
	goldActive  = "6f0f4e5e-5b8a-4d3c-9a71-0c2d9a1b0001"
	goldMaint   = "6f0f4e5e-5b8a-4d3c-9a71-0c2d9a1b0002"
	goldEnroll  = "6f0f4e5e-5b8a-4d3c-9a71-0c2d9a1b0003"
	goldAvail   = "6f0f4e5e-5b8a-4d3c-9a71-0c2d9a1b0004"
	goldPortA1  = "7a1e2d3c-0000-4e5f-8a9b-0c1d2e3f0001"
	goldPortA2  = "7a1e2d3c-0000-4e5f-8a9b-0c1d2e3f0002"
	goldPortM   = "7a1e2d3c-0000-4e5f-8a9b-0c1d2e3f0003"
	goldInst    = "9b9b9b9b-1111-4222-8333-444455556666"
	goldHistory = "5e5e5e5e-aaaa-4bbb-8ccc-ddddeeee0001"
)

// goldenRoutes are the read routes, named by their golden file.
var goldenRoutes = []struct{ name, path string }{
	{"root", "/"},
	{"v1", "/v1/"},
	{"nodes.list", "/v1/nodes"},
	{"nodes.list.limit2", "/v1/nodes?limit=2"},
	{"nodes.list.marker", "/v1/nodes?limit=2&marker=" + goldMaint},
	{"nodes.list.sort-name-desc", "/v1/nodes?sort_key=name&sort_dir=desc"},
	{"nodes.list.sort-provision-updated", "/v1/nodes?sort_key=provision_updated_at&sort_dir=desc&fields=uuid,provision_updated_at"},
	{"nodes.list.maintenance", "/v1/nodes?maintenance=true"},
	{"nodes.list.fault", "/v1/nodes?fault=power%20failure"},
	{"nodes.list.provision-state", "/v1/nodes?provision_state=active"},
	{"nodes.list.associated", "/v1/nodes?associated=true"},
	{"nodes.list.owner", "/v1/nodes?owner=tenant-a"},
	{"nodes.list.detail-param", "/v1/nodes?detail=true"},
	{"nodes.list.fields", "/v1/nodes?fields=uuid,name,driver_info,properties,maintenance_reason,fault,last_error"},
	{"nodes.detail", "/v1/nodes/detail"},
	{"nodes.detail.limit1", "/v1/nodes/detail?limit=1"},
	{"nodes.get", "/v1/nodes/" + goldActive},
	{"nodes.get.by-name", "/v1/nodes/gold-maint"},
	{"nodes.get.enroll", "/v1/nodes/" + goldEnroll},
	{"nodes.get.fields", "/v1/nodes/" + goldActive + "?fields=uuid,driver_info,instance_info,driver_internal_info,extra"},
	{"nodes.get.missing", "/v1/nodes/no-such-node"},
	{"nodes.states", "/v1/nodes/" + goldActive + "/states"},
	{"nodes.history", "/v1/nodes/" + goldActive + "/history"},
	{"nodes.ports", "/v1/nodes/" + goldActive + "/ports"},
	{"nodes.ports.detail", "/v1/nodes/" + goldActive + "/ports/detail"},
	{"ports.list", "/v1/ports"},
	{"ports.list.limit1", "/v1/ports?limit=1"},
	{"ports.list.node", "/v1/ports?node=gold-active"},
	{"ports.list.address", "/v1/ports?address=52:54:00:AA:00:01"},
	{"ports.list.fields", "/v1/ports?fields=uuid,address,local_link_connection,extra,physical_network"},
	{"ports.detail", "/v1/ports/detail"},
	{"ports.get", "/v1/ports/" + goldPortA1},
	{"ports.get.fields", "/v1/ports/" + goldPortA1 + "?fields=uuid,internal_info,local_link_connection"},
	{"drivers.list", "/v1/drivers"},
	{"drivers.get", "/v1/drivers/fake-hardware"},
	{"conductors.list", "/v1/conductors"},
	{"conductors.detail", "/v1/conductors?detail=true"},
}

// goldenStore enrolls the fixed data set: an active node carrying every kind
// of secret and nested objects, a node in maintenance with a fault and a
// last_error naming a password, an unnamed enroll node, an available node in
// another conductor group; three ports with local_link_connection; history.
func goldenStore(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.RegisterConductor(ctx, store.Conductor{Hostname: "gold-conductor", Group: "", Drivers: []string{"fake-hardware"}}); err != nil {
		t.Fatal(err)
	}
	base := func(uuid string, name *string, ps proto.ProvisionState) *proto.Node {
		return &proto.Node{
			UUID: uuid, Name: name, Driver: "fake-hardware", ProvisionState: ps,
			DriverInfo: proto.Dict{}, DriverInternalInfo: proto.Dict{}, InstanceInfo: proto.Dict{},
			Properties: proto.Dict{}, Extra: proto.Dict{}, CleanStep: proto.Dict{}, DeployStep: proto.Dict{},
			ServiceStep: proto.Dict{}, RAIDConfig: proto.Dict{}, TargetRAIDConfig: proto.Dict{}, NetworkData: proto.Dict{},
			Traits: []string{}, CreatedAt: proto.Now(),
			BIOSInterface: "fake", BootInterface: "fake", ConsoleInterface: "fake", DeployInterface: "fake",
			FirmwareInterface: "fake", InspectInterface: "fake", ManagementInterface: "fake", NetworkInterface: "noop",
			PowerInterface: "fake", RAIDInterface: "fake", RescueInterface: "fake", StorageInterface: "noop", VendorInterface: "fake",
			Conductor: str("gold-conductor"),
		}
	}
	on, off := proto.PowerOn, proto.PowerOff

	active := base(goldActive, str("gold-active"), proto.StateActive)
	active.PowerState = &on
	active.InstanceUUID = str(goldInst)
	active.ResourceClass = str("baremetal-large")
	active.Owner = str("tenant-a")
	active.Lessee = str("tenant-b")
	active.Description = str("rack 4, unit 12")
	active.Traits = []string{"CUSTOM_GPU", "HW_CPU_X86_AVX2"}
	active.DriverInfo = proto.Dict{
		"ipmi_address": "10.0.0.11", "ipmi_username": "admin", "ipmi_password": "hunter2",
		"redfish_address": "https://bmc.example:8443", "redfish_password": "s3cret",
		"deploy_kernel": "http://images/kernel", "nested": map[string]any{"snmp_community": "public", "port": 161},
	}
	active.DriverInternalInfo = proto.Dict{
		"agent_secret_token": "tok-123", "agent_url": "http://10.0.0.50:9999",
		"agent_last_heartbeat": "2026-01-01T00:00:00.000000", "clean_steps": []any{map[string]any{"step": "erase_devices", "priority": 10}},
	}
	active.InstanceInfo = proto.Dict{
		"image_source": "http://images/os.qcow2", "image_checksum": "abc", "root_gb": 10,
		"configdrive": "H4sIAAAAAAAA", "capabilities": map[string]any{"boot_mode": "uefi"},
	}
	active.Properties = proto.Dict{
		"cpus": 32, "memory_mb": 262144, "local_gb": 1800, "cpu_arch": "x86_64",
		"capabilities": "boot_mode:uefi,secure_boot:true",
		"root_device":  map[string]any{"serial": "S3Z9NB0K", "size": map[string]any{"gt": 100}},
	}
	active.Extra = proto.Dict{"rack": "r4", "tags": []any{"gpu", "prod"}, "ssh_key": "ssh-ed25519 AAAA", "meta": map[string]any{"k": nil, "n": 1.5}}
	active.ProvisionUpdatedAt = proto.Now()
	active.UpdatedAt = proto.Now()

	maint := base(goldMaint, str("gold-maint"), proto.StateManageable)
	maint.PowerState = &off
	maint.Maintenance = true
	maint.MaintenanceReason = str("fan replaced")
	maint.Fault = str("power failure")
	maint.LastError = str("redfish https://admin:hunter2@bmc.example/redfish/v1 failed: password=hunter2 rejected")
	maint.ResourceClass = str("baremetal")
	maint.DriverInfo = proto.Dict{"redfish_address": "https://bmc2.example", "redfish_username": "root", "redfish_password": "calvin"}
	maint.Properties = proto.Dict{"cpus": 8, "memory_mb": 16384}

	enroll := base(goldEnroll, nil, proto.StateEnroll)

	avail := base(goldAvail, str("gold-avail"), proto.StateAvailable)
	avail.PowerState = &off
	avail.ConductorGroup = "rack5"
	avail.ResourceClass = str("baremetal")
	avail.Owner = str("tenant-a")
	avail.Protected = false
	avail.Retired = true
	avail.RetiredReason = str("end of warranty")
	avail.Shard = str("shard-1")

	for _, n := range []*proto.Node{active, maint, enroll, avail} {
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatalf("golden node %s: %v", n.UUID, err)
		}
	}
	for _, p := range []*proto.Port{
		{UUID: goldPortA1, Address: "52:54:00:aa:00:01", NodeUUID: goldActive, PXEEnabled: true, PhysicalNetwork: str("physnet1"),
			Extra: proto.Dict{"cable": "blue", "vlan": map[string]any{"id": 100}}, InternalInfo: proto.Dict{"tenant_vif_port_id": "vif-1"},
			LocalLinkConnection: proto.Dict{"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Ethernet1/1", "switch_info": "tor-1"},
			Description:         str("uplink to tor-1"), Vendor: str("mellanox"), Category: str("uplink"), AvailableForDynamicPortgroup: true},
		{UUID: goldPortA2, Address: "52:54:00:aa:00:02", NodeUUID: goldActive, PXEEnabled: false, Name: str("gold-active-eth1"),
			Extra: proto.Dict{}, InternalInfo: proto.Dict{},
			LocalLinkConnection: proto.Dict{"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Ethernet1/2", "switch_info": "tor-1"}},
		{UUID: goldPortM, Address: "52:54:00:bb:00:01", NodeUUID: goldMaint, PXEEnabled: true,
			Extra: proto.Dict{"auth_token": "t0k"}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{}, AvailableForDynamicPortgroup: true},
	} {
		if err := st.CreatePort(ctx, p); err != nil {
			t.Fatalf("golden port %s: %v", p.UUID, err)
		}
	}
	for _, ev := range []proto.HistoryEvent{
		{UUID: goldHistory, Severity: "INFO", Event: "Node created with driver fake-hardware", EventType: "api", Conductor: "gold-conductor"},
		{Severity: "ERROR", Event: "Deploy step failed: image fetch", EventType: "deploy", Conductor: "gold-conductor", User: "admin"},
	} {
		if err := st.AddHistory(ctx, goldActive, ev); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

var (
	goldTimeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
	goldUUIDRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
)

// normaliseGolden replaces timestamps with <time> and each distinct UUID with
// <uuid-N>, numbered by first appearance in the whole golden file, so that
// which object is where still shows.
func normaliseGolden(b []byte, ids map[string]string) []byte {
	b = goldTimeRE.ReplaceAll(b, []byte("<time>"))
	return goldUUIDRE.ReplaceAllFunc(b, func(u []byte) []byte {
		k := strings.ToLower(string(u))
		if v, ok := ids[k]; ok {
			return []byte(v)
		}
		v := fmt.Sprintf("<uuid-%d>", len(ids)+1)
		ids[k] = v
		return []byte(v)
	})
}

// goldenHeaders are the response headers a client depends on.
var goldenHeaders = []string{"Content-Type", proto.HeaderMinVersion, proto.HeaderMaxVersion, proto.HeaderIronicAPIVersion, "Location"}

func TestGoldenReads(t *testing.T) {
	st := goldenStore(t)
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "gold-conductor"}))
	defer srv.Close()

	for _, r := range goldenRoutes {
		t.Run(r.name, func(t *testing.T) {
			var out bytes.Buffer
			ids := map[string]string{}
			for _, v := range goldenVersions {
				req, _ := http.NewRequest("GET", srv.URL+r.path, nil)
				req.Host = "kiln.test:6385"
				req.Header.Set("X-OpenStack-Ironic-API-Version", v)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "### GET %s at %s\n%d\n", r.path, v, resp.StatusCode)
				for _, h := range goldenHeaders {
					if hv := resp.Header.Get(h); hv != "" {
						fmt.Fprintf(&out, "%s: %s\n", h, hv)
					}
				}
				out.WriteString("\n")
				out.Write(body)
				if !bytes.HasSuffix(body, []byte("\n")) {
					out.WriteString("\n<no final newline>\n")
				}
				out.WriteString("\n")
			}
			got := normaliseGolden(out.Bytes(), ids)
			path := filepath.Join(goldenDir, r.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll(goldenDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-golden to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s:\n%s", r.path, path, firstDiff(want, got))
			}
		})
	}
}

// firstDiff shows where two golden texts part.
func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d\nwant: %s\ngot:  %s", i+1, w, g)
		}
	}
	return "(lengths differ)"
}

// TestGoldenNormalise checks the normaliser itself: it must keep which UUID
// is which and must not hide anything but timestamps and UUIDs.
func TestGoldenNormalise(t *testing.T) {
	ids := map[string]string{}
	in := `{"a":"` + goldActive + `","b":"` + goldMaint + `","c":"` + strings.ToUpper(goldActive) + `","t":"` +
		time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC).Format(proto.TimeLayout) + `","n":12}`
	got := string(normaliseGolden([]byte(in), ids))
	want := `{"a":"<uuid-1>","b":"<uuid-2>","c":"<uuid-1>","t":"<time>","n":12}`
	if got != want {
		t.Errorf("normalise:\n got %s\nwant %s", got, want)
	}
}
