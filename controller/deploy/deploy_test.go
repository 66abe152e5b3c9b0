package deploy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestImageInfo(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	cases := []struct {
		name    string
		ii      proto.Dict
		props   proto.Dict
		want    string // image_info as JSON
		wantErr string
	}{
		{"checksum, defaults", proto.Dict{"image_source": "http://img/x/disk.raw?a=1", "image_checksum": sum}, nil,
			`{"id":"disk.raw","urls":["http://img/x/disk.raw?a=1"],"disk_format":"raw","container_format":"bare","checksum":"` + sum + `","stream_raw_images":true,"node_uuid":"u1","image_type":"whole-disk"}`, ""},
		{"os hash over checksum, instance hints over properties",
			proto.Dict{"image_source": "file:///srv/p.img", "image_checksum": "x", "image_os_hash_algo": "sha512", "image_os_hash_value": "v",
				"image_disk_format": "qcow2", "image_type": "partition", "root_device": map[string]any{"name": "/dev/sda"}},
			proto.Dict{"root_device": map[string]any{"name": "/dev/sdb"}},
			`{"id":"p.img","urls":["file:///srv/p.img"],"disk_format":"qcow2","container_format":"bare","os_hash_algo":"sha512","os_hash_value":"v","stream_raw_images":true,"node_uuid":"u1","image_type":"partition","root_device":{"name":"/dev/sda"}}`, ""},
		{"hints from properties", proto.Dict{"image_source": "https://i/d", "image_checksum": sum}, proto.Dict{"root_device": map[string]any{"serial": "s"}},
			`{"id":"d","urls":["https://i/d"],"disk_format":"raw","container_format":"bare","checksum":"` + sum + `","stream_raw_images":true,"node_uuid":"u1","image_type":"whole-disk","root_device":{"serial":"s"}}`, ""},
		{"no source", proto.Dict{"image_checksum": sum}, nil, "", "image_source is required"},
		{"bad scheme", proto.Dict{"image_source": "ftp://i/d", "image_checksum": sum}, nil, "", "must be an http(s):// or file:// URL"},
		{"no checksum", proto.Dict{"image_source": "http://i/d"}, nil, "", "needs image_checksum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := ImageInfo(&proto.Node{UUID: "u1", InstanceInfo: tc.ii, Properties: tc.props})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(info)
			if string(b) != tc.want {
				t.Errorf("image_info\n got %s\nwant %s", b, tc.want)
			}
		})
	}
}
