package decide

import (
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// prepare_instance_boot installs the boot loader by Ironic's rule
// (configure_local_boot): software RAID, partition images, whole-disk
// images in UEFI mode; never a whole-disk image in BIOS mode.
func TestPrepareInstanceBootInstallsTheBootLoader(t *testing.T) {
	softwareRAID := proto.Dict{"logical_disks": []any{
		map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software", "is_root_volume": true}}}
	hardwareRAID := proto.Dict{"logical_disks": []any{
		map[string]any{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}}}
	prefix := "Deploy step deploy.prepare_instance_boot failed on node " + nodeID + ": Failed to install a bootloader: "
	cases := []struct {
		name         string
		deployIface  string
		instanceInfo proto.Dict
		properties   proto.Dict
		raid         proto.Dict
		want         []string
		bl           AgentInstallBootloader // checked when the install runs (OnError aside)
	}{
		{name: "whole disk, BIOS: the image's boot sector boots", deployIface: "direct",
			properties: proto.Dict{"capabilities": "boot_mode:bios"},
			want:       []string{"agent partition uuids", "prepare instance"}},
		{name: "whole disk, BIOS by deploy_boot_mode", deployIface: "direct",
			instanceInfo: proto.Dict{"deploy_boot_mode": "bios"}, properties: proto.Dict{"capabilities": "boot_mode:uefi"},
			want: []string{"agent partition uuids", "prepare instance"}},
		{name: "whole disk, UEFI: the boot entry", deployIface: "direct",
			properties: proto.Dict{"capabilities": "boot_mode:uefi"},
			want:       []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:         AgentInstallBootloader{TargetBootMode: "uefi"}},
		{name: "whole disk, UEFI from instance_info's capabilities", deployIface: "direct",
			instanceInfo: proto.Dict{"capabilities": map[string]any{"boot_mode": "uefi"}}, properties: proto.Dict{"capabilities": "boot_mode:bios"},
			want: []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:   AgentInstallBootloader{TargetBootMode: "uefi"}},
		{name: "whole disk, no mode named: the agent decides by how it booted", deployIface: "direct",
			want: []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:   AgentInstallBootloader{}},
		{name: "whole disk, hardware RAID, BIOS: nothing", deployIface: "direct",
			properties: proto.Dict{"capabilities": "boot_mode:bios"}, raid: hardwareRAID,
			want: []string{"agent partition uuids", "prepare instance"}},
		{name: "whole disk, software RAID, BIOS: every member", deployIface: "direct",
			properties: proto.Dict{"capabilities": "boot_mode:bios"}, raid: softwareRAID,
			want: []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:   AgentInstallBootloader{TargetBootMode: "bios", SoftwareRAID: true}},
		{name: "software RAID, UEFI, the root UUID from the image's metadata", deployIface: "direct",
			instanceInfo: proto.Dict{"image_rootfs_uuid": "7e9d5b52-0c0e-4a3a-9d1e-0f4c5b1e2a3d"},
			properties:   proto.Dict{"capabilities": "boot_mode:uefi"}, raid: softwareRAID,
			want: []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:   AgentInstallBootloader{TargetBootMode: "uefi", SoftwareRAID: true, RootUUID: "7e9d5b52-0c0e-4a3a-9d1e-0f4c5b1e2a3d"}},
		{name: "partition image, BIOS: GRUB from the root", deployIface: "direct",
			instanceInfo: proto.Dict{"image_type": "partition"}, properties: proto.Dict{"capabilities": "boot_mode:bios"},
			want: []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:   AgentInstallBootloader{TargetBootMode: "bios", NeedRoot: true}},
		{name: "partition image, UEFI: with the ESP", deployIface: "direct",
			instanceInfo: proto.Dict{"image_type": "partition", "deploy_boot_mode": "UEFI"},
			want:         []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:           AgentInstallBootloader{TargetBootMode: "uefi", SendESP: true, NeedRoot: true}},
		{name: "partition image on software RAID", deployIface: "direct",
			instanceInfo: proto.Dict{"image_type": "partition"}, properties: proto.Dict{"capabilities": "boot_mode:uefi"}, raid: softwareRAID,
			want: []string{"agent partition uuids", "agent install bootloader", "prepare instance"},
			bl:   AgentInstallBootloader{TargetBootMode: "uefi", SendESP: true, SoftwareRAID: true}},
		{name: "custom-agent writes no image: the boot interface only", deployIface: "custom-agent",
			raid: softwareRAID, properties: proto.Dict{"capabilities": "boot_mode:uefi"},
			want: []string{"prepare instance"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := deploying(t, tc.deployIface)
			for k, v := range tc.instanceInfo {
				in.Node.InstanceInfo[k] = v
			}
			for k, v := range tc.properties {
				in.Node.Properties[k] = v
			}
			in.Node.TargetRAIDConfig = tc.raid
			acts := conductorStep(in, proto.StepCall{Step: proto.Step{Step: "prepare_instance_boot", Interface: "deploy", Priority: 60}})
			want(t, acts, tc.want...)
			for _, a := range acts {
				bl, ok := a.(AgentInstallBootloader)
				if !ok {
					continue
				}
				if bl.OnError.Prefix != prefix || bl.OnError.Ignore {
					t.Errorf("on error %+v, want the deploy failing with prefix %q", bl.OnError, prefix)
				}
				bl.OnError = OnError{}
				if bl != tc.bl {
					t.Errorf("install_bootloader %+v, want %+v", bl, tc.bl)
				}
			}
		})
	}
}

// A failed install_bootloader fails the deploy, naming the step and the
// agent's error, as Ironic's "Failed to install a bootloader" does.
func TestAFailedBootLoaderInstallFailsTheDeploy(t *testing.T) {
	in := deploying(t, "direct")
	in.Node.Properties["capabilities"] = "boot_mode:uefi"
	acts := Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: succeeded(proto.StepDeploy, in.State.Steps[0])})
	want(t, acts, "move resume", "agent partition uuids", "agent install bootloader", "prepare instance",
		"agent power off", "power off", "power on", "move done")
	acts = Step(in, failedAt[AgentInstallBootloader](t, acts, "no EFI system partition on /dev/md0"))
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateDeployFailed,
		"Deploy step deploy.prepare_instance_boot failed on node "+nodeID+": Failed to install a bootloader: no EFI system partition on /dev/md0")
	if fs.Steps != nil {
		t.Errorf("plan %v kept after the failure", fs.Steps)
	}
}
