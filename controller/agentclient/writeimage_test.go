package agentclient

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/deploy"
	"github.com/kilnhq/kiln/proto"
)

// TestWriteImageRoundTrip sends write_image with typed arguments built by
// controller/deploy and decodes the request exactly as the agent does
// (CommandRequest, ExecuteStepParams.UnmarshalFor, StepCall.ImageArgs):
// the agent must get the same ImageInfo and config drive, and the args
// on the wire must be the typed arguments' own encoding.
func TestWriteImageRoundTrip(t *testing.T) {
	n := &proto.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", InstanceInfo: proto.Dict{
		"image_source":        "https://images.example/os/disk.qcow2?sig=abc",
		"image_disk_format":   "qcow2",
		"image_os_hash_algo":  "sha256",
		"image_os_hash_value": strings.Repeat("ab", 32),
		"root_device":         map[string]any{"serial": "S123", "size": ">= 10"},
	}}
	info, err := deploy.ImageInfo(n)
	if err != nil {
		t.Fatal(err)
	}
	cd, _ := json.Marshal("H4sIAAAAAAAA/wMAAAAAAAAAAAA=")
	want := proto.PrepareImageParams{ImageInfo: info, Configdrive: cd}
	step := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 80}, Image: &want}

	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(proto.CommandResult{ID: "1", CommandName: "execute_deploy_step", CommandStatus: proto.CommandRunning})
	}))
	t.Cleanup(srv.Close)
	c := New(Options{})
	if _, err := c.ExecuteStep(t.Context(), Agent{URL: srv.URL, Token: "tok"}, proto.StepDeploy, step, nil, nil, nil); err != nil {
		t.Fatal(err)
	}

	var req proto.CommandRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request %s: %v", body, err)
	}
	var ep proto.ExecuteStepParams
	if err := ep.UnmarshalFor(proto.StepDeploy, req.Params); err != nil {
		t.Fatal(err)
	}
	got, err := ep.Step.ImageArgs()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the agent decoded\n%+v\nthe controller sent\n%+v", got, want)
	}
	var wire struct {
		Step struct {
			Args json.RawMessage `json:"args"`
		} `json:"step"`
	}
	if err := json.Unmarshal(req.Params, &wire); err != nil {
		t.Fatal(err)
	}
	typed, _ := json.Marshal(want)
	if !bytes.Equal(wire.Step.Args, typed) {
		t.Errorf("args on the wire\n%s\nare not the typed arguments' encoding\n%s", wire.Step.Args, typed)
	}
	// The agent's echo of the step is recognised as the step that was sent.
	if !SameStep(ep.Step, step) {
		t.Error("the agent's echo of write_image does not match the step sent")
	}
}
