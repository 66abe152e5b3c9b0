package decide

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

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

func TestCommandProgress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status proto.CommandStatus
		result string
		want   proto.CommandProgress
		ok     bool
	}{
		{"running with progress", proto.CommandRunning, `{"progress":{"bytes_done":512,"bytes_total":2048,"stage":"write"}}`, proto.CommandProgress{BytesDone: 512, BytesTotal: 2048, Stage: "write"}, true},
		{"running, IPA (null result)", proto.CommandRunning, `null`, proto.CommandProgress{}, false},
		{"running, no result", proto.CommandRunning, ``, proto.CommandProgress{}, false},
		{"running, other result", proto.CommandRunning, `{"clean_result":{}}`, proto.CommandProgress{}, false},
		{"succeeded", proto.CommandSucceeded, `{"progress":{"bytes_done":1}}`, proto.CommandProgress{}, false},
		{"garbage", proto.CommandRunning, `{"progress":"half"}`, proto.CommandProgress{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := commandProgress(proto.CommandResult{CommandStatus: tc.status, CommandResult: json.RawMessage(tc.result)})
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
