package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/kilnhq/kiln/test/bmcsim"
)

// vmediaOf reads GET …/vmedia through gophercloud (a JSON list of devices).
func vmediaOf(t *testing.T, k *kiln, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	r := nodes.GetVirtualMedia(context.Background(), newClient(t, k, "1.93"), id)
	if r.Err != nil {
		t.Fatalf("get vmedia: %v", r.Err)
	}
	b, _ := json.Marshal(r.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("vmedia answer is not a list of devices: %s", b)
	}
	return out
}

// TestVirtualMediaServe: attach, read and detach virtual media through
// gophercloud on a real kiln serve, on a redfish node whose BMC is the
// simulator (over HTTP) and on a fake-hardware node; the simulator's drive
// shows what the API did. Gating, bad input and a device the BMC lacks
// answer as Ironic does and change nothing.
func TestVirtualMediaServe(t *testing.T) {
	t.Parallel()
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	bmc := lab.BMCs[0]
	user, pass := bmc.Credentials()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	ctx := context.Background()
	c := newClient(t, k, "1.93")
	rf, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "redfish", Name: "vm-redfish",
		DriverInfo: map[string]any{"redfish_address": bmc.URL, "redfish_username": user, "redfish_password": pass}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	fake, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: "vm-fake"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	const img = "http://images.example/rescue.iso"
	// The redfish node: the simulator's CD.
	if err := nodes.AttachVirtualMedia(ctx, c, rf.UUID, nodes.AttachVirtualMediaOpts{DeviceType: nodes.VirtualMediaCD, ImageURL: img,
		ImageDownloadSource: nodes.ImageDownloadSourceHTTP}).ExtractErr(); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if md, _ := lab.Memory(0).Media(ctx); !md.Inserted || md.Image != img {
		t.Fatalf("simulated BMC media after attach: %+v", md)
	}
	got := vmediaOf(t, k, rf.UUID)
	if len(got) != 1 || got[0]["image"] != img || got[0]["inserted"] != true || !slices.Contains(got[0]["media_types"].([]any), any("CD")) {
		t.Errorf("vmedia of the redfish node: %v", got)
	}
	err = nodes.AttachVirtualMedia(ctx, c, rf.UUID, nodes.AttachVirtualMediaOpts{DeviceType: nodes.VirtualMediaFloppy, ImageURL: img}).ExtractErr()
	wantStatus(t, err, http.StatusBadRequest)
	if err := nodes.DetachVirtualMedia(ctx, c, rf.UUID, nodes.DetachVirtualMediaOpts{DeviceTypes: []nodes.VirtualMediaDeviceType{nodes.VirtualMediaCD}}).ExtractErr(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	if md, _ := lab.Memory(0).Media(ctx); md.Inserted || md.Image != "" {
		t.Errorf("simulated BMC media after detach: %+v", md)
	}

	// The fake-hardware node: three drives, held by the fake BMC.
	for _, a := range []nodes.AttachVirtualMediaOpts{{DeviceType: nodes.VirtualMediaCD, ImageURL: img}, {DeviceType: nodes.VirtualMediaFloppy, ImageURL: "nfs://files/floppy.img"}} {
		if err := nodes.AttachVirtualMedia(ctx, c, "vm-fake", a).ExtractErr(); err != nil {
			t.Fatalf("attach %s: %v", a.DeviceType, err)
		}
	}
	got = vmediaOf(t, k, fake.UUID)
	if len(got) != 3 || got[0]["image"] != img || got[1]["image"] != "nfs://files/floppy.img" || got[2]["inserted"] != false {
		t.Errorf("vmedia of the fake node: %v", got)
	}
	if err := nodes.DetachVirtualMedia(ctx, c, fake.UUID, nodes.DetachVirtualMediaOpts{}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	for _, d := range vmediaOf(t, k, fake.UUID) {
		if d["inserted"] != false || d["image"] != "" {
			t.Errorf("after detaching everything: %v", d)
		}
	}

	// Gating and bad input, each in Ironic's status and changing nothing.
	v := func(ver string) []string { return []string{"X-OpenStack-Ironic-API-Version", ver} }
	body := `{"device_type":"cdrom","image_url":"` + img + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		code                     int
		fault                    string
	}{
		{"attach below 1.89", "POST", "/v1/nodes/vm-fake/vmedia", body, v("1.88"), 404, ""},
		{"get below 1.93", "GET", "/v1/nodes/vm-fake/vmedia", "", v("1.92"), 404, ""},
		{"bad device type", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"tape","image_url":"` + img + `"}`, v("1.93"), 400, "'tape' is not one of"},
		{"no image_url", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"cdrom"}`, v("1.93"), 400, "'image_url' is a required property"},
		{"unknown field", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"cdrom","image_url":"` + img + `","username":"u"}`, v("1.93"), 400, "'username' was unexpected"},
		{"bad scheme", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"cdrom","image_url":"file:///etc/passwd"}`, v("1.93"), 400, "Unsupported or missing URL scheme: file"},
		{"no scheme", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"cdrom","image_url":"rescue.iso"}`, v("1.93"), 400, "Unsupported or missing URL scheme"},
		{"swift", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"cdrom","image_url":"` + img + `","image_download_source":"swift"}`, v("1.93"), 400, "swift"},
		{"long url", "POST", "/v1/nodes/vm-fake/vmedia", `{"device_type":"cdrom","image_url":"http://x/` + strings.Repeat("a", 2100) + `"}`, v("1.93"), 400, "longer than"},
		{"bad detach type", "DELETE", "/v1/nodes/vm-fake/vmedia?device_types=cdrom,tape", "", v("1.93"), 400, "Invalid device type(s) tape (valid are disk, cdrom, floppy)"},
		{"unknown node", "POST", "/v1/nodes/nope/vmedia", body, v("1.93"), 404, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, b := k.call(tc.method, tc.path, tc.body, tc.headers...)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %s", code, tc.code, b)
			}
			if tc.fault != "" && !strings.Contains(faultstring(t, b), tc.fault) {
				t.Errorf("faultstring %q, want it to contain %q", faultstring(t, b), tc.fault)
			}
		})
	}
	for _, d := range vmediaOf(t, k, fake.UUID) {
		if d["inserted"] != false {
			t.Errorf("a refused request attached media: %v", d)
		}
	}
}
