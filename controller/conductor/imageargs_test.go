package conductor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
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

func TestWithImageArgs(t *testing.T) {
	image := &proto.PrepareImageParams{ImageInfo: proto.ImageInfo{ID: "i", URLs: []string{"http://i"}}, Configdrive: json.RawMessage(`"secret-drive"`)}
	fs := flowstate.State{ImageArgs: image}
	write := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 80}}
	cases := []struct {
		name      string
		step      proto.StepCall
		fs        flowstate.State
		wantImage bool
	}{
		{"write_image gets the planned arguments", write, fs, true},
		{"operator's args win", proto.StepCall{Step: write.Step, Args: map[string]any{"image_info": map[string]any{"id": "x"}}}, fs, false},
		{"other steps get none", proto.StepCall{Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}, fs, false},
		{"a plan from before typed arguments", write, flowstate.State{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := withImageArgs(tc.step, tc.fs)
			if (got.Image != nil) != tc.wantImage {
				t.Fatalf("Image = %v, want set: %v", got.Image, tc.wantImage)
			}
			// What the API shows as deploy_step never holds the config drive.
			b, _ := json.Marshal(stepDict(got))
			if strings.Contains(string(b), "secret-drive") {
				t.Errorf("deploy_step shows the config drive: %s", b)
			}
			if tc.wantImage && !strings.Contains(string(b), `"configdrive":"******"`) {
				t.Errorf("deploy_step hides that a config drive is sent: %s", b)
			}
		})
	}
}
