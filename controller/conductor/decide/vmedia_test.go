package decide

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// TestVirtualMediaAnswers: a virtual media request is answered like a
// boot-device one: the drives read, nothing for an attach or detach, the
// refusal or failure in the BMC's words; it never records a boot device.
func TestVirtualMediaAnswers(t *testing.T) {
	attach := proto.ManagementRequest{ID: "v1", Op: proto.OpAttachVirtualMedia, VirtualMedia: &proto.VirtualMediaAttach{DeviceType: "cdrom", ImageURL: "http://x/a.iso"}}
	detach := proto.ManagementRequest{ID: "v2", Op: proto.OpDetachVirtualMedia}
	get := proto.ManagementRequest{ID: "v3", Op: proto.OpGetVirtualMedia}
	cd := proto.VirtualMedia{MediaTypes: []string{"CD"}, Inserted: true, Image: "http://x/a.iso"}
	for _, tc := range []struct {
		name       string
		ev         ManagementAnswered
		wantResult string
		wantCheck  bool // a BMC check recorded
	}{
		{"attached", ManagementAnswered{Request: attach}, `{"id":"v1"}`, true},
		{"detached", ManagementAnswered{Request: detach}, `{"id":"v2"}`, true},
		{"read", ManagementAnswered{Request: get, Media: []proto.VirtualMedia{cd}},
			`{"id":"v3","virtual_media":[{"media_types":["CD"],"inserted":true,"image":"http://x/a.iso"}]}`, true},
		{"a drive the BMC lacks", ManagementAnswered{Request: attach, Err: driver.InvalidParameterf("no Floppy drive")},
			`{"id":"v1","error":"Failed to attach virtual media for node ` + nodeID + `: no Floppy drive","invalid":true}`, false},
		{"a BMC that fails", ManagementAnswered{Request: detach, Err: errString("503")},
			`{"id":"v2","error":"Failed to detach virtual media for node ` + nodeID + `: 503"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(proto.StateManageable, proto.NoState)
			req := tc.ev.Request
			in := input(t, n, flowstate.State{ManagementRequest: &req}, "direct")
			_, fs := after(t, in, Step(in, tc.ev))
			if b, _ := json.Marshal(fs.ManagementResult); string(b) != tc.wantResult {
				t.Errorf("result\n got %s\nwant %s", b, tc.wantResult)
			}
			if fs.ManagementRequest != nil || fs.BootDevice != nil {
				t.Errorf("request %+v boot device %+v: want answered, no boot device", fs.ManagementRequest, fs.BootDevice)
			}
			if (fs.LastBMCCheck != nil) != tc.wantCheck {
				t.Errorf("BMC check %+v, want recorded: %v", fs.LastBMCCheck, tc.wantCheck)
			}
		})
	}
}
