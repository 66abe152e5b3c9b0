package proto

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// roundTrip decodes in into a fresh T, re-encodes it and checks that the JSON is
// semantically unchanged: every field the wire carries survives our types.
func roundTrip[T any](t *testing.T, in string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	var a, b any
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%T round trip changed JSON\n in: %s\nout: %s", v, in, out)
	}
	return v
}

func TestLookupResponseRoundTrip(t *testing.T) {
	in := `{"node":{"uuid":"1be26c0b-03f2-4d2e-ae87-c02d7f33c123","properties":{"cpu_arch":"x86_64"},
	 "instance_info":{"image_source":"http://x/img.raw"},"driver_internal_info":{"agent_url":"http://10.0.0.5:9999"},
	 "links":[{"href":"http://c/v1/nodes/1be2","rel":"self"}]},
	 "config":{"heartbeat_timeout":300,"agent_token":"******","agent_token_required":true,
	 "agent_md5_checksum_enable":false,"disable_deep_image_inspection":false,
	 "permitted_image_formats":["raw","qcow2"],"metrics":{"backend":"noop"},"metrics_statsd":{"statsd_port":8125},
	 "agent_containers":{"allow_arbitrary_containers":false}}}`
	r := roundTrip[LookupResponse](t, in)
	if r.Node.UUID != "1be26c0b-03f2-4d2e-ae87-c02d7f33c123" || r.Config.HeartbeatTimeout != 300 ||
		r.Config.AgentToken != MaskedToken || !r.Config.AgentTokenRequired {
		t.Fatalf("decoded wrong: %+v", r)
	}
}

func TestHeartbeatRequestJSON(t *testing.T) {
	in := `{"callback_url":"https://[fd00::5]:9999","agent_version":"kiln-0.1","agent_token":"tok",
	 "agent_verify_ca":"-----BEGIN CERTIFICATE-----\n","agent_status":"start","agent_status_message":"m"}`
	roundTrip[HeartbeatRequest](t, in)
	b, _ := json.Marshal(HeartbeatRequest{CallbackURL: "http://1.2.3.4:9999", AgentVersion: "v"})
	if string(b) != `{"callback_url":"http://1.2.3.4:9999","agent_version":"v"}` {
		t.Fatalf("minimal heartbeat = %s", b)
	}
}

func TestCommandResultJSON(t *testing.T) {
	roundTrip[CommandResult](t, `{"id":"a","command_name":"sync","command_status":"SUCCEEDED","command_error":null,"command_result":null}`)
	roundTrip[CommandResult](t, `{"id":"b","command_name":"execute_clean_step","command_status":"FAILED",
	 "command_error":{"type":"CommandExecutionError","code":500,"message":"Command execution failed","details":"boom"},
	 "command_result":null}`)
	roundTrip[CommandList](t, `{"commands":[{"id":"c","command_name":"prepare_image","command_status":"RUNNING",
	 "command_error":null,"command_result":{"progress":{"bytes_done":10,"bytes_total":100,"stage":"write"}}}]}`)
	// A zero result must still carry command_error and command_result as null:
	// the conductor reads both keys.
	b, _ := json.Marshal(CommandResult{ID: "x", CommandName: "sync", CommandStatus: CommandSucceeded})
	if !strings.Contains(string(b), `"command_error":null`) || !strings.Contains(string(b), `"command_result":null`) {
		t.Fatalf("nulls missing: %s", b)
	}
	for _, s := range []CommandStatus{CommandRunning, CommandSucceeded, CommandFailed, CommandCleanVersionMismatch} {
		if strings.ToUpper(string(s)) != string(s) {
			t.Fatalf("status %q not upper case", s)
		}
	}
}

func TestCommandRequest(t *testing.T) {
	r, err := NewCommandRequest(CmdSync, nil)
	if err != nil || string(r.Params) != "{}" {
		t.Fatalf("nil params: %v %s", err, r.Params)
	}
	if _, err := NewCommandRequest("x.y", []int{1}); err == nil {
		t.Fatal("array params accepted")
	}
	r, err = NewCommandRequest(CmdInstallBootloader, InstallBootloaderParams{RootUUID: "u", TargetBootMode: "uefi"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if string(b) != `{"name":"image.install_bootloader","params":{"root_uuid":"u","target_boot_mode":"uefi"}}` {
		t.Fatalf("request = %s", b)
	}
	for _, c := range []struct {
		in       string
		ext, cmd string
		ok       bool
	}{
		{"standby.sync", "standby", "sync", true},
		{"sync", "", "", false},
		{".sync", "", "", false},
		{"standby.", "", "", false},
		{"a.b.c", "", "", false},
	} {
		ext, cmd, ok := SplitCommandName(c.in)
		if ext != c.ext || cmd != c.cmd || ok != c.ok {
			t.Errorf("SplitCommandName(%q) = %q %q %v", c.in, ext, cmd, ok)
		}
	}
}

func TestStepsResultJSON(t *testing.T) {
	in := `{"clean_steps":{"GenericHardwareManager":[{"step":"erase_devices","priority":10,"interface":"deploy",
	 "reboot_requested":false,"abortable":true,"argsinfo":{"x":{"description":"d","required":false}}}]},
	 "hardware_manager_version":{"generic_hardware_manager":"1.2"}}`
	r := roundTrip[StepsResult](t, in)
	if r.Kind != StepClean || r.Steps["GenericHardwareManager"][0].Priority != 10 ||
		r.HardwareManagerVersion["generic_hardware_manager"] != "1.2" {
		t.Fatalf("decoded %+v", r)
	}
	for _, k := range []StepKind{StepDeploy, StepService} {
		b, err := json.Marshal(StepsResult{Kind: k})
		if err != nil || !strings.Contains(string(b), `"`+string(k)+`_steps":{}`) {
			t.Fatalf("%s: %s %v", k, b, err)
		}
	}
	if _, err := json.Marshal(StepsResult{}); err == nil {
		t.Fatal("StepsResult without kind encoded")
	}
	var bad StepsResult
	if err := json.Unmarshal([]byte(`{"x_steps":{}}`), &bad); err == nil {
		t.Fatal("unknown kind decoded")
	}
}

func TestExecuteStepJSON(t *testing.T) {
	in := `{"deploy_result":{"ok":true},"deploy_step":{"step":"write_image","priority":80,"interface":"deploy",
	 "reboot_requested":false,"abortable":false,"args":{"image_info":{"id":"i"}}}}`
	r := roundTrip[ExecuteStepResult](t, in)
	if r.Kind != StepDeploy || r.Step.Step.Step != "write_image" {
		t.Fatalf("decoded %+v", r)
	}
	params := `{"step":{"step":"erase_devices","priority":10,"interface":"deploy","reboot_requested":false,
	 "abortable":true,"args":{"a":1}},"node":{"uuid":"n"},"ports":[{"address":"aa:bb:cc:dd:ee:ff"}],
	 "clean_version":{"generic_hardware_manager":"1.2"}}`
	var p ExecuteStepParams
	if err := p.UnmarshalFor(StepClean, []byte(params)); err != nil {
		t.Fatal(err)
	}
	if p.Step.Step.Step != "erase_devices" || p.Version["generic_hardware_manager"] != "1.2" || p.Step.Args["a"] != 1.0 {
		t.Fatalf("decoded %+v", p)
	}
	b, err := p.MarshalFor(StepClean)
	if err != nil {
		t.Fatal(err)
	}
	var a, c any
	json.Unmarshal([]byte(params), &a)
	json.Unmarshal(b, &c)
	if !reflect.DeepEqual(a, c) {
		t.Fatalf("params round trip: %s", b)
	}
	var q ExecuteStepParams
	if err := q.UnmarshalFor(StepDeploy, []byte(`{"step":{"step":"x"},"deploy_version":null}`)); err != nil || q.Version != nil {
		t.Fatalf("null version: %v %v", err, q.Version)
	}
	if err := q.UnmarshalFor(StepDeploy, []byte(`{"node":{}}`)); err == nil {
		t.Fatal("missing step accepted")
	}
}

func TestImageInfoRoundTrip(t *testing.T) {
	in := `{"id":"img","urls":["http://h/img.qcow2"],"disk_format":"qcow2","container_format":"bare",
	 "checksum":"abc","os_hash_algo":"sha256","os_hash_value":"00ff","stream_raw_images":true,"node_uuid":"n",
	 "proxies":{"http":"http://p:3128"},"no_proxy":"10.0.0.1","image_type":"partition","kernel":"k","ramdisk":"r",
	 "root_mb":10240,"swap_mb":1,"ephemeral_mb":2,"ephemeral_format":"ext4","preserve_ephemeral":true,
	 "deploy_boot_mode":"uefi","boot_option":"local","disk_label":"gpt","root_device":{"name":"s== /dev/sda"},
	 "image_download_source":"http"}`
	roundTrip[ImageInfo](t, in)
	roundTrip[PrepareImageParams](t, `{"image_info":{"id":"i","urls":["u"],"stream_raw_images":false},"configdrive":{"meta_data":{"uuid":"x"}}}`)
	roundTrip[PartitionUUIDs](t, `{"root uuid":"r","efi system partition uuid":"e","PReP Boot partition uuid":"p"}`)
}

func TestInspectionJSON(t *testing.T) {
	in := `{"inventory":{"cpu":{"count":2}},"root_disk":{"name":"/dev/vda"},"boot_interface":"01-52-54-00-12-34-56",
	 "configuration":{"collectors":["default","logs"],"managers":[{"name":"generic_hardware_manager","version":"1.2"}]},
	 "error":null,"lldp_raw":{"eth0":[[1,"04525400123456"]]}}`
	roundTrip[InspectionRequest](t, in)
	old := roundTrip[InspectionResponse](t, `{"uuid":"u1"}`)
	if old.NodeUUID() != "u1" {
		t.Fatal(old)
	}
	n := roundTrip[InspectionResponse](t, `{"node":{"uuid":"u2","properties":{},"instance_info":{},"driver_internal_info":{}},"config":{"heartbeat_timeout":30,"agent_token":"t","agent_token_required":true,"agent_md5_checksum_enable":false,"disable_deep_image_inspection":false}}`)
	if n.NodeUUID() != "u2" {
		t.Fatal(n)
	}
}

func TestAgentDocsJSON(t *testing.T) {
	roundTrip[AgentStatus](t, `{"started_at":1700000000.25,"version":"kiln-0.1"}`)
	roundTrip[AgentFault](t, `{"faultcode":"Client","faultstring":"Agent is busy"}`)
	roundTrip[AgentRoot](t, `{"name":"n","description":"d","versions":[{"id":"v1","links":[{"href":"h","rel":"self"}]}],"default_version":{"id":"v1","links":[]}}`)
	roundTrip[AgentV1](t, `{"id":"v1","links":[],"commands":[{"href":"h","rel":"self"}],"status":[],"media_types":[{"base":"application/json","type":"t"}]}`)
}
