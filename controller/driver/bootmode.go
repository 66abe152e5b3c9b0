package driver

import (
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// TargetBootMode is the boot mode a node's instance is deployed for, as
// Ironic's boot_mode_utils.get_boot_mode_for_deploy reads it: "uefi" when
// the node asks for secure boot, else instance_info.deploy_boot_mode, else
// the boot_mode capability (instance_info's, then properties'). "" when
// nothing names one: Kiln has no configured default, and the agent then
// uses the mode its ramdisk booted in.
func TargetBootMode(n *proto.Node) string {
	if WantsSecureBoot(n) {
		return BootModeUEFI
	}
	if m, _ := n.InstanceInfo["deploy_boot_mode"].(string); m != "" {
		return normalBootMode(m)
	}
	for _, src := range []any{n.InstanceInfo["capabilities"], n.Properties["capabilities"]} {
		caps, err := parseCapabilities(src)
		if err != nil {
			continue
		}
		if m, ok := caps["boot_mode"]; ok && m != "" {
			return normalBootMode(m)
		}
	}
	return ""
}

// normalBootMode is m as install_bootloader's target_boot_mode takes it.
func normalBootMode(m string) string {
	switch m = strings.ToLower(m); m {
	case "legacy":
		return BootModeBIOS
	}
	return m
}
