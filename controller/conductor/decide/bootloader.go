package decide

import (
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// installBootloader is the boot loader step of Ironic's direct deploy
// (AgentDeploy.configure_local_boot, run by prepare_instance_boot once the
// image is written): the agent's image.install_bootloader runs
//   - when the node has software RAID (a logical disk of target_raid_config
//     with controller "software"): the agent puts the boot loader on every
//     member, so either disk boots alone;
//   - for a partition image, which brings no boot loader of its own;
//   - for a whole-disk image in UEFI mode: the UEFI boot entry for the
//     image's loader.
//
// A whole-disk image in BIOS mode boots its own boot sector: nothing runs.
// Where the node names no boot mode (Ironic would take its configured
// default, uefi), the call goes out without target_boot_mode and the agent
// decides by how its ramdisk booted: nothing for BIOS whole-disk images.
func installBootloader(in Input, onErr OnError) []Action {
	n := in.Node
	mode := driver.TargetBootMode(n)
	raid := softwareRAID(n)
	partition := partitionImage(n)
	if !raid && !partition && mode == driver.BootModeBIOS {
		return nil
	}
	a := AgentInstallBootloader{
		TargetBootMode: mode,
		SoftwareRAID:   raid,
		// Ironic sends the ESP's UUID for partition images in UEFI mode;
		// a whole-disk image's ESP is found on the disk.
		SendESP: partition && mode != driver.BootModeBIOS,
		// Without a root UUID Ironic installs nothing for a partition
		// image (and logs that the deploy will likely fail).
		NeedRoot: partition && !raid,
		OnError:  OnError{Prefix: onErr.Prefix + "Failed to install a bootloader: "},
	}
	if raid {
		// For software RAID the root file system's UUID comes from the
		// image's metadata (image_rootfs_uuid) when the node has it, else
		// from what the agent reported after writing the image.
		a.RootUUID, _ = n.InstanceInfo["image_rootfs_uuid"].(string)
	}
	return []Action{a}
}

// softwareRAID: a logical disk of the node's target_raid_config is built
// by the agent (controller "software"), as Ironic tests it.
func softwareRAID(n *proto.Node) bool {
	lds, _ := n.TargetRAIDConfig["logical_disks"].([]any)
	for _, ld := range lds {
		if m, ok := ld.(map[string]any); ok && m["controller"] == "software" {
			return true
		}
	}
	return false
}

// partitionImage: instance_info asks for a partition image (whole-disk
// is the default, as in deploy.ImageInfo).
func partitionImage(n *proto.Node) bool {
	t, _ := n.InstanceInfo["image_type"].(string)
	return t == "partition"
}
