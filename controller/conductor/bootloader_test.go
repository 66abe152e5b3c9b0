package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// bootloaderAgent is an agent whose write_image succeeded: it reports
// partition UUIDs and records install_bootloader's params.
type bootloaderAgent struct {
	AgentClient
	cmds    []proto.CommandResult
	uuids   proto.PartitionUUIDs
	sent    []proto.InstallBootloaderParams
	failure error
	// beat, when set, is the agent's heartbeat reaching the API as the
	// boot loader is in: InstallBootloader returns once the wait sees it.
	beat func()
}

func (a *bootloaderAgent) Commands(context.Context, agentclient.Agent) ([]proto.CommandResult, error) {
	return a.cmds, nil
}

func (a *bootloaderAgent) GetPartitionUUIDs(context.Context, agentclient.Agent) (proto.PartitionUUIDs, error) {
	return a.uuids, nil
}

func (a *bootloaderAgent) InstallBootloader(ctx context.Context, ag agentclient.Agent, p proto.InstallBootloaderParams) (proto.CommandResult, error) {
	a.sent = append(a.sent, p)
	if a.beat != nil {
		if ag.Heartbeats == nil {
			return proto.CommandResult{}, errors.New("the wait for install_bootloader does not listen for heartbeats")
		}
		a.beat()
		select {
		case <-ag.Heartbeats:
		case <-ctx.Done():
			return proto.CommandResult{}, errors.New("the agent's heartbeat did not reach the wait for install_bootloader")
		}
	}
	return proto.CommandResult{CommandStatus: proto.CommandSucceeded}, a.failure
}

func (a *bootloaderAgent) PowerOff(context.Context, agentclient.Agent) error { return nil }

// Once write_image is done, prepare_instance_boot sends install_bootloader
// the partition UUIDs the agent reported, and a failed install fails the
// deploy with the agent's error.
func TestWriteImageDoneInstallsTheBootLoader(t *testing.T) {
	uuids := proto.PartitionUUIDs{RootUUID: "1d7a1f0e-5f3c-4d6b-8a52-7c2e9b0d4f11", EFISystemPartUUID: "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"}
	cases := []struct {
		name     string
		info     proto.Dict
		raid     proto.Dict
		failure  error
		beat     bool // the agent heartbeats as the boot loader is in
		want     []proto.InstallBootloaderParams
		state    proto.ProvisionState
		errorHas string
	}{
		{name: "partition image, UEFI", info: proto.Dict{"image_type": "partition"},
			want:  []proto.InstallBootloaderParams{{RootUUID: uuids.RootUUID, EFISystemPartUUID: uuids.EFISystemPartUUID, TargetBootMode: "uefi"}},
			state: proto.StateActive},
		{name: "the agent fails", info: proto.Dict{"image_type": "partition"}, failure: errors.New("install boot loader on software RAID /dev/md0: no ESP"),
			want:  []proto.InstallBootloaderParams{{RootUUID: uuids.RootUUID, EFISystemPartUUID: uuids.EFISystemPartUUID, TargetBootMode: "uefi"}},
			state: proto.StateDeployFailed, errorHas: "Deploy step deploy.prepare_instance_boot failed on node 5e0c3a1b-2d4f-4a6b-8c9d-0e1f2a3b4c5d: Failed to install a bootloader: install boot loader on software RAID /dev/md0: no ESP"},
		{name: "the agent's heartbeat ends the wait", info: proto.Dict{"image_type": "partition"}, beat: true,
			want:  []proto.InstallBootloaderParams{{RootUUID: uuids.RootUUID, EFISystemPartUUID: uuids.EFISystemPartUUID, TargetBootMode: "uefi"}},
			state: proto.StateActive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The deadline only ends a wait the heartbeat failed to end.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			write := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 80}}
			plan := []proto.StepCall{write}
			for _, s := range []string{"prepare_instance_boot", "tear_down_agent", "switch_to_tenant_network", "boot_instance"} {
				plan = append(plan, proto.StepCall{Step: proto.Step{Step: s, Interface: "deploy"}})
			}
			info := proto.Dict{"image_source": "http://img/disk.raw", "image_checksum": strings.Repeat("ab", 32)}
			for k, v := range tc.info {
				info[k] = v
			}
			target := proto.StateActive
			n := &proto.Node{UUID: "5e0c3a1b-2d4f-4a6b-8c9d-0e1f2a3b4c5d", Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
				PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "direct",
				TargetProvisionState: &target, DeployStep: proto.Dict{"interface": "deploy", "step": "write_image"},
				Properties: proto.Dict{"capabilities": "boot_mode:uefi"}, InstanceInfo: info, TargetRAIDConfig: tc.raid,
				DriverInternalInfo: proto.Dict{
					proto.InfoAgentURL: "http://192.0.2.1:9999", proto.InfoSteps: plan,
					proto.InfoStepIndex: 0, proto.InfoStepSent: true, proto.InfoHeartbeatPending: time.Now().UTC().Format(time.RFC3339Nano),
				}}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			res, _ := json.Marshal(proto.ExecuteStepResult{Kind: proto.StepDeploy, Step: write})
			agent := &bootloaderAgent{uuids: uuids, failure: tc.failure, cmds: []proto.CommandResult{
				{CommandName: "get_deploy_steps", CommandStatus: proto.CommandSucceeded},
				{CommandName: "execute_deploy_step", CommandStatus: proto.CommandSucceeded, CommandResult: res},
			}}
			c := New(Config{Store: st, Agent: agent, Name: "c1"})
			if tc.beat {
				agent.beat = func() { c.AgentHeartbeated(n.UUID) }
			}
			cur, err := st.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if err := (&flow{c: c, n: cur}).act(ctx); err != nil {
				t.Fatal(err)
			}
			if len(agent.sent) != len(tc.want) || (len(tc.want) > 0 && agent.sent[0] != tc.want[0]) {
				t.Errorf("install_bootloader sent %+v, want %+v", agent.sent, tc.want)
			}
			if c.beats.ch[n.UUID] != nil {
				t.Error("the pass still listens for the agent's heartbeats after its wait")
			}
			got, err := st.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			le := ""
			if got.LastError != nil {
				le = *got.LastError
			}
			if got.ProvisionState != tc.state || (tc.errorHas == "") != (le == "") || !strings.Contains(le, tc.errorHas) {
				t.Errorf("node %s, last_error %q; want %s with %q", got.ProvisionState, le, tc.state, tc.errorHas)
			}
		})
	}
}

// install_bootloader's params: the decision's, with the UUIDs the agent
// reported after write_image.
func TestInstallBootloaderParams(t *testing.T) {
	reported := &proto.PartitionUUIDs{RootUUID: "root-1", EFISystemPartUUID: "esp-1", PRePBootPartUUID: "prep-1"}
	for _, tc := range []struct {
		name     string
		reported *proto.PartitionUUIDs
		a        decide.AgentInstallBootloader
		want     proto.InstallBootloaderParams
	}{
		{"whole disk", reported, decide.AgentInstallBootloader{TargetBootMode: "uefi"},
			proto.InstallBootloaderParams{RootUUID: "root-1", PrepBootPartUUID: "prep-1", TargetBootMode: "uefi"}},
		{"partition image with its ESP", reported, decide.AgentInstallBootloader{SendESP: true, TargetBootMode: "uefi"},
			proto.InstallBootloaderParams{RootUUID: "root-1", EFISystemPartUUID: "esp-1", PrepBootPartUUID: "prep-1", TargetBootMode: "uefi"}},
		{"software RAID: image_rootfs_uuid wins", reported, decide.AgentInstallBootloader{RootUUID: "fs-uuid", SoftwareRAID: true, TargetBootMode: "bios"},
			proto.InstallBootloaderParams{RootUUID: "fs-uuid", PrepBootPartUUID: "prep-1", TargetBootMode: "bios"}},
		{"nothing reported", nil, decide.AgentInstallBootloader{SendESP: true},
			proto.InstallBootloaderParams{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &proto.Node{DriverInternalInfo: proto.Dict{}}
			if tc.reported != nil {
				n.DriverInternalInfo[proto.InfoPartitionUUIDs] = tc.reported
			}
			if got := installBootloaderParams(n, tc.a); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
