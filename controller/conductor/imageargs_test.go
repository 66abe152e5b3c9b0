package conductor

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestImageArgs(t *testing.T) {
	n := &proto.Node{UUID: "u1", InstanceInfo: proto.Dict{
		"image_source": "http://img/disk.raw", "image_checksum": strings.Repeat("ab", 32), "configdrive": "H4sIAAAA",
	}}
	args, err := imageArgs(n)
	if err != nil {
		t.Fatal(err)
	}
	if args.ImageInfo.ID != "disk.raw" || args.ImageInfo.NodeUUID != "u1" || string(args.Configdrive) != `"H4sIAAAA"` {
		t.Errorf("image args %+v, configdrive %s", args.ImageInfo, args.Configdrive)
	}
	delete(n.InstanceInfo, "configdrive")
	if args, err = imageArgs(n); err != nil || args.Configdrive != nil {
		t.Errorf("without a config drive: %s, %v", args.Configdrive, err)
	}
	delete(n.InstanceInfo, "image_checksum")
	if _, err := imageArgs(n); err == nil {
		t.Error("an image without a checksum got arguments")
	}
}
