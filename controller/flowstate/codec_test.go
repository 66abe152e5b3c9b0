package flowstate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// roundTrip stores d as the store does (JSON) and reads it back.
func roundTrip(t *testing.T, d proto.Dict) proto.Dict {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out proto.Dict
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	yes := true
	full := State{
		Agent: Agent{URL: "http://192.0.2.1:9999", Version: "10.1", VerifyCA: "PEM", LastHeartbeat: at,
			Token: "tok", TokenPregenerated: true},
		CachedDeploySteps:   map[string][]proto.Step{"GenericHardwareManager": {{Step: "write_image", Interface: "deploy", Priority: 80}}},
		CachedStepsVersions: map[string]string{"GenericHardwareManager": "1.2"},
		Request: &Request{Verb: "active", From: proto.StateAvailable, RequestedAt: "2026-12-01T10:00:00.000000+00:00",
			DeploySteps: []proto.StepCall{}, DisableRamdisk: &yes},
		BootDevice:        &BootDevice{Device: "pxe", Persistent: true},
		BootDevicePending: true,
		PowerTimeout:      30,
		HeartbeatPending:  at,
		InspectionPending: true,
		Steps:             []proto.StepCall{{Step: proto.Step{Step: "erase_devices", Interface: "deploy", Priority: 10}}},
		StepIndex:         1,
		StepSent:          true,
		StepSentAt:        at,
		ManualCleanSteps:  []proto.StepCall{{Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}},
		Progress:          &Progress{Step: "deploy.write_image", BytesDone: 1, BytesTotal: 2},
		PartitionUUIDs:    &proto.PartitionUUIDs{RootUUID: "r"},
		LastBMCCheck:      &proto.BMCCheck{At: at, Operation: "power state", Error: "refused"},
		ManagementRequest: &proto.ManagementRequest{ID: "m1", Op: proto.OpSetBootDevice, BootDevice: "disk", RequestedAt: at},
		ManagementResult:  &proto.ManagementResult{ID: "m0", Error: "no"},
	}
	for name, s := range map[string]State{"empty": {}, "full": full} {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(roundTrip(t, Encode(s)))
			if err != nil {
				t.Fatal(err)
			}
			want := s
			if name == "full" {
				want.Version = Version
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
	if d := Encode(State{}); len(d) != 0 {
		t.Errorf("empty state encodes as %v, want {}", d)
	}
}

// TestKeys pins the keys Ironic clients and older Kiln records use.
func TestKeys(t *testing.T) {
	d := Encode(State{Agent: Agent{URL: "u", Token: "t", TokenPregenerated: true},
		Steps: []proto.StepCall{}, HeartbeatPending: time.Unix(0, 0)})
	for _, k := range []string{"agent_url", "agent_secret_token", "agent_secret_token_pregenerated", "kiln_steps",
		"kiln_step_index", "kiln_step_sent", "kiln_heartbeat_pending", "kiln_flow_version"} {
		if _, ok := d[k]; !ok {
			t.Errorf("key %s missing from %v", k, d)
		}
	}
	if d["kiln_step_index"] != 0 || d["kiln_step_sent"] != false {
		t.Errorf("a fresh plan has index %v, sent %v; want 0, false", d["kiln_step_index"], d["kiln_step_sent"])
	}
}

func TestDecodeOldShapes(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want func(s State) bool
	}{
		{"index as float64", `{"kiln_steps":[],"kiln_step_index":3.0,"kiln_step_sent":true}`,
			func(s State) bool { return s.StepIndex == 3 && s.StepSent && s.Steps != nil && s.Version == 0 }},
		{"timeout as float64", `{"kiln_power_timeout":30}`, func(s State) bool { return s.PowerTimeout == 30 }},
		{"Ironic time layout", `{"agent_last_heartbeat":"2026-12-01T10:00:00.000000+00:00"}`,
			func(s State) bool { return s.Agent.LastHeartbeat.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) }},
		{"request from the API", `{"kiln_request":{"verb":"clean","from":"manageable","clean_steps":[{"interface":"deploy","step":"erase_devices","args":{}}]}}`,
			func(s State) bool {
				return s.Request != nil && s.Request.Verb == "clean" && s.Request.From == proto.StateManageable &&
					len(s.Request.CleanSteps) == 1 && s.Request.CleanSteps[0].Step.Step == "erase_devices"
			}},
		{"null values are absent", `{"kiln_steps":null,"agent_url":null}`,
			func(s State) bool { return s.Steps == nil && s.Agent.URL == "" }},
		{"failed BMC check without error", `{"kiln_last_bmc_check":{"at":"2026-12-01T10:00:00Z","operation":"verify","ok":false}}`,
			func(s State) bool { return s.LastBMCCheck != nil && s.LastBMCCheck.Error == "unknown error" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d proto.Dict
			if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
				t.Fatal(err)
			}
			s, err := Decode(d)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(s) {
				t.Errorf("decoded %+v", s)
			}
			if out := Encode(s); out[keyVersion] == nil && len(out) > 0 {
				t.Errorf("re-encoded without version: %v", out)
			}
		})
	}
}

func TestDecodeInMemoryValues(t *testing.T) {
	// Values as Go code puts them, before any JSON round trip.
	s, err := Decode(proto.Dict{"kiln_step_index": 2, "kiln_steps": []proto.StepCall{{}}, "kiln_power_timeout": json.Number("5")})
	if err != nil || s.StepIndex != 2 || len(s.Steps) != 1 || s.PowerTimeout != 5 {
		t.Errorf("got %+v, %v", s, err)
	}
}

func TestUnknownKeysKept(t *testing.T) {
	in := proto.Dict{"ironic_thing": map[string]any{"a": 1.0}, "agent_url": "http://x", "other": "v"}
	s, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	s.Agent.URL = ""
	out := Encode(s)
	if !reflect.DeepEqual(out["ironic_thing"], in["ironic_thing"]) || out["other"] != "v" {
		t.Errorf("unknown keys lost: %v", out)
	}
	if _, ok := out["agent_url"]; ok {
		t.Errorf("cleared field still stored: %v", out)
	}
}

func TestDecodeBadTypes(t *testing.T) {
	cases := []struct{ in, key, want string }{
		{`{"kiln_step_index":"two"}`, "kiln_step_index", "whole number"},
		{`{"kiln_step_index":1.5}`, "kiln_step_index", "whole number"},
		{`{"agent_url":7}`, "agent_url", "want a string, got a number"},
		{`{"kiln_steps":{"a":1}}`, "kiln_steps", "want []proto.StepCall"},
		{`{"kiln_heartbeat_pending":"yesterday"}`, "kiln_heartbeat_pending", "not an RFC 3339 timestamp"},
		{`{"kiln_inspection_pending":"yes"}`, "kiln_inspection_pending", "want a boolean"},
		{`{"kiln_flow_version":99}`, "kiln_flow_version", "newer"},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			var d proto.Dict
			if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
				t.Fatal(err)
			}
			d["agent_version"] = "1.0"
			s, err := Decode(d)
			if err == nil || !strings.Contains(err.Error(), "driver_internal_info."+tc.key) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one naming %s and saying %q", err, tc.key, tc.want)
			}
			if s.Agent.Version != "1.0" {
				t.Errorf("good fields lost: %+v", s)
			}
			if tc.key != keyVersion && !reflect.DeepEqual(Encode(s)[tc.key], d[tc.key]) {
				t.Errorf("bad value not kept: %v", Encode(s)[tc.key])
			}
		})
	}
}

func TestAgentLifecycle(t *testing.T) {
	base := State{Agent: Agent{URL: "u", Version: "v", VerifyCA: "ca", LastHeartbeat: time.Unix(1, 0), Token: "t"},
		CachedCleanSteps: map[string][]proto.Step{}, CachedStepsVersions: map[string]string{}}
	s := base
	s.WipeAgent()
	if s.Agent != (Agent{Version: "v"}) || s.CachedCleanSteps != nil || s.CachedStepsVersions != nil {
		t.Errorf("wipe left %+v", s)
	}
	s = base
	s.Agent.TokenPregenerated = true
	s.WipeAgent()
	if s.Agent.Token != "t" || !s.Agent.TokenPregenerated || s.Agent.URL != "" {
		t.Errorf("wipe with a pre-generated token left %+v", s.Agent)
	}
	s.ForgetAgent()
	if s.Agent.Token != "" || s.Agent.TokenPregenerated {
		t.Errorf("forget left %+v", s.Agent)
	}
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`{}`, `{"kiln_steps":[],"kiln_step_index":1}`, `{"kiln_request":{"verb":"deploy"}}`,
		`{"kiln_last_bmc_check":{"at":"2026-12-01T10:00:00Z","ok":true}}`, `{"agent_url":1,"x":[1,2]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d proto.Dict
		if json.Unmarshal(b, &d) != nil {
			return
		}
		s, _ := Decode(d)
		// Whatever decoded must survive a store round trip unchanged.
		again, err := Decode(roundTrip(t, Encode(s)))
		if err != nil {
			if _, err0 := Decode(d); err0 == nil {
				t.Fatalf("a clean record re-encoded badly: %v", err)
			}
			return
		}
		first, second := roundTrip(t, Encode(s)), roundTrip(t, Encode(again))
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("unstable:\n%v\n%v", first, second)
		}
	})
}

func TestReadWriteParts(t *testing.T) {
	var d proto.Dict
	in := `{"agent_url":"http://a","kiln_steps":[{"step":"s","interface":"deploy","priority":1}],"kiln_step_index":0,
		"kiln_heartbeat_pending":"bad time","other":1,"kiln_progress":{"step":"deploy.s","bytes_done":1,"bytes_total":2,"updated_at":null}}`
	if err := json.Unmarshal([]byte(in), &d); err != nil {
		t.Fatal(err)
	}
	n := &proto.Node{DriverInternalInfo: d}
	s, err := Read(n, PartAgent|PartWork)
	if err == nil || !strings.Contains(err.Error(), "kiln_heartbeat_pending") {
		t.Errorf("error %v, want one naming kiln_heartbeat_pending", err)
	}
	if s.Agent.URL != "http://a" || s.Steps != nil || s.Progress != nil {
		t.Errorf("Read decoded outside its parts: %+v", s)
	}
	s.Agent.URL, s.Agent.Token = "", "tok"
	Write(n, s, PartAgent|PartWork)
	got := n.DriverInternalInfo
	if _, ok := got["agent_url"]; ok || got["agent_secret_token"] != "tok" {
		t.Errorf("agent part not written: %v", got)
	}
	if got["kiln_heartbeat_pending"] != "bad time" || got["other"] != 1.0 || got["kiln_steps"] == nil || got["kiln_progress"] == nil {
		t.Errorf("Write touched what it was not given: %v", got)
	}
	if got[keyVersion] != Version {
		t.Errorf("version not written: %v", got)
	}
	full, err := Decode(got)
	if err == nil || len(full.Steps) != 1 || full.Progress == nil || full.Agent.Token != "tok" {
		t.Errorf("after Write, Decode gives %+v, %v", full, err)
	}
}

// TestSecretsStoredGeneric: values that may hold secrets are stored as
// generic JSON, where the masking of API answers finds them.
func TestSecretsStoredGeneric(t *testing.T) {
	s := State{
		ImageArgs: &proto.PrepareImageParams{ImageInfo: proto.ImageInfo{ID: "i"}, Configdrive: json.RawMessage(`"drive"`)},
		Steps:     []proto.StepCall{{Step: proto.Step{Step: "s"}, Args: map[string]any{"password": "p"}}},
		Request:   &Request{Verb: "deploy", DeploySteps: []proto.StepCall{{Args: map[string]any{"configdrive": "x"}}}},
	}
	d := Encode(s)
	if args, ok := d["kiln_image_args"].(map[string]any); !ok || args["configdrive"] != "drive" {
		t.Errorf("kiln_image_args stored as %T %v", d["kiln_image_args"], d["kiln_image_args"])
	}
	for _, k := range []string{"kiln_steps"} {
		if _, ok := d[k].([]any); !ok {
			t.Errorf("%s stored as %T", k, d[k])
		}
	}
	if _, ok := d["kiln_request"].(map[string]any); !ok {
		t.Errorf("kiln_request stored as %T", d["kiln_request"])
	}
	masked := secrets.MaskDict(d)
	if cd := masked["kiln_image_args"].(map[string]any)["configdrive"]; cd != secrets.Masked {
		t.Errorf("API answers would show the config drive: %v", cd)
	}
	if pw := masked["kiln_steps"].([]any)[0].(map[string]any)["args"].(map[string]any)["password"]; pw != secrets.Masked {
		t.Errorf("API answers would show a step's password: %v", pw)
	}
	back, err := Decode(d)
	if err != nil || !reflect.DeepEqual(back.ImageArgs, s.ImageArgs) || back.Steps[0].Args["password"] != "p" {
		t.Errorf("decoded back %+v, %v", back, err)
	}
}
