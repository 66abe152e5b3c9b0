package decide

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Hardware configuration: the out-of-band steps of the bios, raid, firmware
// and management interfaces (Input.DriverSteps) and secure boot.

var (
	biosApply      = proto.Step{Step: "apply_configuration", Interface: "bios", RebootRequested: true}
	raidCreateStep = proto.Step{Step: "create_configuration", Interface: "raid"}
	resetBMC       = proto.Step{Step: "reset_bmc", Interface: "management"}
	eraseMeta      = proto.StepCall{Step: proto.Step{Step: "erase_devices_metadata", Interface: "deploy"}}
)

func TestARebootingOutOfBandStepWaitsForTheAgentToComeBack(t *testing.T) {
	n := node(proto.StateCleanWait, proto.StateManageable)
	s := withAgent(flowstate.State{ManualCleanSteps: []proto.StepCall{{Step: proto.Step{Step: "apply_configuration", Interface: "bios"}}, eraseMeta}})
	in := input(t, n, s, "direct")
	in.DriverSteps = []proto.Step{biosApply, raidCreateStep}
	acts := Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentCleanSteps, HeartbeatAt: t0})
	// The step restarts the machine, into the agent again (the ramdisk
	// boot is prepared first): nothing more goes to the agent now.
	want(t, acts, "move resume", "prepare ramdisk", "driver step bios.apply_configuration", "move wait")
	for _, a := range acts {
		if p, ok := a.(PrepareRamdisk); ok && p.KernelArgs["ipa-api-url"] != in.Config.APIURL {
			t.Errorf("the ramdisk is prepared with %v, want ipa-api-url %s", p.KernelArgs, in.Config.APIURL)
		}
	}
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateCleanWait, "")
	if fs.StepIndex != 1 || fs.StepSent || len(fs.Steps) != 2 {
		t.Fatalf("plan %v index %d sent %v: want the second step next, not sent", fs.Steps, fs.StepIndex, fs.StepSent)
	}
	if !fs.Steps[0].RebootRequested {
		t.Errorf("the planned BIOS step lost reboot_requested: %+v", fs.Steps[0])
	}

	// The executor's reboot wiped the agent; the new one heartbeats.
	fs.WipeAgent()
	fs.Agent.URL = "http://192.0.2.10:9999"
	in = input(t, got, fs, "direct")
	in.DriverSteps = []proto.Step{biosApply, raidCreateStep}
	acts = Step(in, Heartbeat{At: t0})
	want(t, acts, "agent get clean steps again")

	// Its steps are recorded; the plan stays and its next step is sent.
	acts = Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentCleanSteps, HeartbeatAt: t0, Refresh: true})
	want(t, acts, "agent execute deploy.erase_devices_metadata")
	got, fs = after(t, in, acts)
	if fs.CachedCleanSteps == nil || fs.StepIndex != 1 || !fs.StepSent || len(fs.Steps) != 2 {
		t.Errorf("after the refresh: cached %v, index %d sent %v plan %v", fs.CachedCleanSteps, fs.StepIndex, fs.StepSent, fs.Steps)
	}
	wantState(t, got, proto.StateCleanWait, "")

	// A failed refresh fails the flow, naming the agent.
	got, _ = after(t, in, Step(in, AgentStepsListed{Kind: proto.StepClean, Err: errors.New("connection refused"), Refresh: true}))
	wantState(t, got, proto.StateCleanFailed, "getting clean steps from the agent")
}

func TestAHeartbeatWithTheAgentsVersionsKnownDoesNotAskAgain(t *testing.T) {
	n := node(proto.StateCleanWait, proto.StateManageable)
	s := withAgent(flowstate.State{Steps: []proto.StepCall{{Step: biosApply}, eraseMeta}, StepIndex: 1,
		CachedStepsVersions: map[string]string{"GenericHardwareManager": "1.1"}})
	in := input(t, n, s, "direct")
	// The BIOS step found nothing to change and did not reboot: the
	// agent still runs, and gets the next step at its next heartbeat.
	want(t, Step(in, Heartbeat{At: t0}), "agent execute deploy.erase_devices_metadata")
}

func TestOutOfBandStepsRunWithoutAnAgent(t *testing.T) {
	cases := []struct {
		name      string
		from      proto.ProvisionState
		target    proto.ProvisionState
		verb      proto.Verb
		steps     []proto.StepCall
		driver    []proto.Step
		wantActs  []string
		wantState proto.ProvisionState
		wantError string
	}{
		{"manual clean of a BIOS step", proto.StateManageable, proto.NoState, proto.VerbClean,
			[]proto.StepCall{{Step: proto.Step{Step: "apply_configuration", Interface: "bios"}, Args: map[string]any{"settings": []any{}}}},
			[]proto.Step{biosApply},
			[]string{"driver step bios.apply_configuration", "power off", "refresh hardware", "move done"}, proto.StateManageable, ""},
		{"manual clean of two RAID steps, no cache to refresh", proto.StateManageable, proto.NoState, proto.VerbClean,
			[]proto.StepCall{{Step: proto.Step{Step: "delete_configuration", Interface: "raid"}}, {Step: raidCreateStep}},
			[]proto.Step{{Step: "delete_configuration", Interface: "raid"}, raidCreateStep},
			[]string{"driver step raid.delete_configuration", "driver step raid.create_configuration", "power off", "move done"}, proto.StateManageable, ""},
		{"a step no interface offers", proto.StateManageable, proto.NoState, proto.VerbClean,
			[]proto.StepCall{{Step: resetBMC}, eraseMeta},
			[]proto.Step{resetBMC},
			[]string{"move fail", "history ERROR"}, proto.StateCleanFailed, "deploy.erase_devices_metadata is not offered"},
		{"service of a BMC reset", proto.StateActive, proto.NoState, proto.VerbService,
			[]proto.StepCall{{Step: resetBMC}},
			[]proto.Step{resetBMC},
			[]string{"driver step management.reset_bmc", "move done"}, proto.StateActive, ""},
		{"service without out-of-band steps stays fake", proto.StateActive, proto.NoState, proto.VerbService,
			[]proto.StepCall{eraseMeta},
			[]proto.Step{resetBMC},
			[]string{"fake deploy", "move done"}, proto.StateActive, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, s := requested(t, tc.from, tc.target, tc.verb)
			s.Request.CleanSteps, s.Request.ServiceSteps = tc.steps, tc.steps
			in := input(t, n, s, "fake")
			in.DriverSteps = tc.driver
			acts := Step(in, Classify(in))
			want(t, acts, tc.wantActs...)
			got, fs := after(t, in, acts)
			wantState(t, got, tc.wantState, tc.wantError)
			if fs.Request != nil || fs.Steps != nil {
				t.Errorf("request %v plan %v left behind", fs.Request, fs.Steps)
			}
		})
	}
}

func TestAFailedOutOfBandStepFailsTheFlowNamingIt(t *testing.T) {
	n, s := requested(t, proto.StateActive, proto.NoState, proto.VerbService)
	s.Request.ServiceSteps = []proto.StepCall{{Step: resetBMC}}
	in := input(t, n, s, "ramdisk")
	in.DriverSteps = []proto.Step{resetBMC}
	acts := Step(in, Classify(in))
	got, fs := after(t, in, Step(in, failedAt[DriverStep](t, acts, "BMC did not come back")))
	wantState(t, got, proto.StateServiceFailed, "Service step management.reset_bmc failed on node "+nodeID+": BMC did not come back")
	if fs.Steps != nil {
		t.Errorf("plan %v kept after failure", fs.Steps)
	}
}

func TestSecureBootFollowsTheNodesCapability(t *testing.T) {
	secure := func(n *proto.Node) *proto.Node {
		n.Properties["capabilities"] = "boot_mode:uefi,secure_boot:true"
		return n
	}
	t.Run("off before cleaning", func(t *testing.T) {
		n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbProvide)
		in := input(t, secure(n), s, "direct")
		want(t, Step(in, Classify(in)), "secure boot false", "prepare ramdisk", "rebooting", "move wait")
		got, _ := after(t, in, Step(in, failedAt[SetSecureBoot](t, Step(in, Classify(in)), "no SecureBoot resource")))
		wantState(t, got, proto.StateCleanFailed, "Cleaning of node "+nodeID+" failed: no SecureBoot resource")
	})
	t.Run("not asked, not touched", func(t *testing.T) {
		n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbProvide)
		in := input(t, n, s, "direct")
		want(t, Step(in, Classify(in)), "prepare ramdisk", "rebooting", "move wait")
	})
	t.Run("on before a ramdisk instance boots", func(t *testing.T) {
		n, s := requested(t, proto.StateAvailable, proto.NoState, proto.VerbActive)
		in := input(t, secure(n), s, "ramdisk")
		want(t, Step(in, Classify(in)), "secure boot true", "prepare ramdisk", "rebooting", "move done")
	})
	t.Run("on after the instance's boot is prepared", func(t *testing.T) {
		in := deploying(t, "direct")
		secure(in.Node)
		acts := conductorStep(in, proto.StepCall{Step: proto.Step{Step: "prepare_instance_boot", Interface: "deploy"}})
		want(t, acts, "agent partition uuids", "agent install bootloader", "prepare instance", "secure boot true")
		if bl := find[AgentInstallBootloader](t, acts); bl.TargetBootMode != "uefi" {
			t.Errorf("install_bootloader for %q, want uefi: secure boot needs it", bl.TargetBootMode)
		}
	})
	t.Run("on when servicing boots the instance again", func(t *testing.T) {
		n := secure(node(proto.StateServiceWait, proto.StateActive))
		s := withAgent(flowstate.State{Steps: []proto.StepCall{firmwareStep}, StepSent: true})
		in := input(t, n, s, "direct")
		acts := Step(in, AgentCommandsRead{Kind: proto.StepService, Commands: succeeded(proto.StepService, firmwareStep)})
		want(t, acts, "agent power off", "power off", "clean up ramdisk", "prepare instance", "secure boot true", "power on", "move resume", "move done")
	})
}

// The other management calls: what the API waits on is in the result;
// boot mode and secure boot changes, which nobody waits on, land on the
// node (the fields read back, or last_error).
func TestManagementOperationAnswers(t *testing.T) {
	on, off := true, false
	mode := proto.ManagementRequest{ID: "m1", Op: proto.OpSetBootMode, BootMode: "bios"}
	secure := proto.ManagementRequest{ID: "m2", Op: proto.OpSetSecureBoot, SecureBoot: &on}
	cases := []struct {
		name           string
		ev             ManagementAnswered
		wantResult     string
		wantBootMode   string
		wantSecureBoot *bool
		wantError      string
	}{
		{"indicators listed", ManagementAnswered{Request: proto.ManagementRequest{ID: "i1", Op: proto.OpGetIndicators},
			Read: ManagementRead{Indicators: []proto.Indicator{driver.SystemLED}}},
			`{"id":"i1","indicators":[{"component":"system","name":"led","readonly":false,"states":["blinking","off","on"]}]}`, "", nil, ""},
		{"an indicator read", ManagementAnswered{Request: proto.ManagementRequest{ID: "i2", Op: proto.OpGetIndicator}, Read: ManagementRead{IndicatorState: "on"}},
			`{"id":"i2","indicator_state":"on"}`, "", nil, ""},
		{"an NMI refused", ManagementAnswered{Request: proto.ManagementRequest{ID: "n1", Op: proto.OpInjectNMI}, Err: driver.InvalidParameterf("no NMI here")},
			`{"id":"n1","error":"Failed to inject NMI for node ` + nodeID + `: no NMI here","invalid":true}`, "", nil, ""},
		{"boot mode set and read back", ManagementAnswered{Request: mode, Read: ManagementRead{BootMode: "bios", SecureBoot: &off}},
			`{"id":"m1"}`, "bios", &off, ""},
		{"secure boot that failed", ManagementAnswered{Request: secure, Err: errString("PATCH SecureBoot: 500")},
			`{"id":"m2","error":"Failed to set secure boot for node ` + nodeID + `: PATCH SecureBoot: 500"}`, "", nil, "Failed to set secure boot for node " + nodeID + ": PATCH SecureBoot: 500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node(proto.StateManageable, proto.NoState)
			req := tc.ev.Request
			in := input(t, n, flowstate.State{ManagementRequest: &req}, "direct")
			got, fs := after(t, in, Step(in, tc.ev))
			if b, _ := json.Marshal(fs.ManagementResult); string(b) != tc.wantResult {
				t.Errorf("result\n got %s\nwant %s", b, tc.wantResult)
			}
			if fs.ManagementRequest != nil {
				t.Error("the request is still pending")
			}
			if gotMode := deref(got.BootMode); (tc.wantBootMode == "" && got.BootMode != nil) || (tc.wantBootMode != "" && gotMode != tc.wantBootMode) {
				t.Errorf("boot_mode %s, want %q", gotMode, tc.wantBootMode)
			}
			if (got.SecureBoot == nil) != (tc.wantSecureBoot == nil) || (got.SecureBoot != nil && *got.SecureBoot != *tc.wantSecureBoot) {
				t.Errorf("secure_boot %v, want %v", got.SecureBoot, tc.wantSecureBoot)
			}
			wantState(t, got, proto.StateManageable, tc.wantError)
		})
	}
}
