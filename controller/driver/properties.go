package driver

import "maps"

// The driver_info keys each hardware type reads, with what they mean: GET
// /v1/drivers/{name}/properties shows them, as Ironic shows its drivers'.

// deployProperties are read by every hardware type that boots the agent.
var deployProperties = map[string]string{
	"deploy_kernel":  "URL or path of the agent's kernel, for network boot. Required with deploy_ramdisk unless deploy_iso is set.",
	"deploy_ramdisk": "URL or path of the agent's initramfs, for network boot. Required with deploy_kernel unless deploy_iso is set.",
	"deploy_iso":     "URL of an ISO holding the agent, for virtual media boot. Optional.",
}

var typeProperties = map[string]map[string]string{
	FakeHardware: {
		"fake_power_delay":      "Seconds each power call takes. Optional.",
		"fake_boot_delay":       "Seconds each boot call takes. Optional.",
		"fake_management_delay": "Seconds each management call takes. Optional.",
		"fake_inspect_delay":    "Seconds each inspection takes. Optional.",
		"fake_deploy_delay":     "Seconds each deploy call takes. Optional.",
		"fake_power_error":      "Message with which every power call fails. Optional.",
		"fake_boot_error":       "Message with which every boot call fails. Optional.",
		"fake_management_error": "Message with which every management call fails. Optional.",
		"fake_inspect_error":    "Message with which every inspection fails. Optional.",
		"fake_deploy_error":     "Message with which every deploy call fails. Optional.",
	},
	"redfish": {
		"redfish_address":   "The BMC's Redfish address: host, host:port or URL (https by default). Required.",
		"redfish_system_id": "Path of the ComputerSystem to manage; the only one when not given. Optional.",
		"redfish_username":  "User name for the BMC. Optional.",
		"redfish_password":  "Password for the BMC. Optional.",
		"redfish_verify_ca": "true, false, or a path to a CA bundle to verify the BMC's certificate with; true when not given. Optional.",
		"redfish_auth_type": "basic, session or auto; auto when not given. Optional.",
	},
	"ipmi": {
		"ipmi_address":    "The BMC's IP address or host name. Required.",
		"ipmi_port":       "The BMC's UDP port; 623 when not given. Optional.",
		"ipmi_username":   "User name for the BMC. Optional.",
		"ipmi_password":   "Password for the BMC. Optional.",
		"ipmi_priv_level": "Privilege level: ADMINISTRATOR, OPERATOR, USER or CALLBACK; ADMINISTRATOR when not given. Optional.",
	},
}

// Properties returns the driver_info keys hardware type name reads and
// their descriptions; false if no such type is registered.
func Properties(name string) (map[string]string, bool) {
	if _, ok := Lookup(name); !ok {
		return nil, false
	}
	out := maps.Clone(deployProperties)
	maps.Copy(out, typeProperties[name])
	return out, true
}
