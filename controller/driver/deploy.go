package driver

import (
	"fmt"
)

// DeployInterface is what a deploy interface means to the conductor's
// decisions: the flows are sequenced there, and these traits choose their
// branches, so a new deploy interface is a registration, not a switch.
type DeployInterface struct {
	Name string
	// Agent: cleaning, deploying, servicing and rescue run in the ramdisk
	// agent (booted for them).
	Agent bool
	// WritesImage: the agent writes instance_info's image (write_image,
	// image_info checked before the ramdisk boots).
	WritesImage bool
	// RamdiskInstance: the ramdisk itself is the instance; deploying boots
	// it and ends.
	RamdiskInstance bool
	// WantsDeploySteps: without the operator's deploy_steps only the
	// instance boot runs (worth a warning in the history).
	WantsDeploySteps bool
}

func init() {
	RegisterDeploy(DeployInterface{Name: "fake"})
	RegisterDeploy(DeployInterface{Name: "direct", Agent: true, WritesImage: true})
	RegisterDeploy(DeployInterface{Name: "custom-agent", Agent: true, WantsDeploySteps: true})
	RegisterDeploy(DeployInterface{Name: "ramdisk", RamdiskInstance: true})
}

var deploys = map[string]DeployInterface{}

// RegisterDeploy registers a deploy interface under d.Name.
func RegisterDeploy(d DeployInterface) { register(deploys, "deploy", d.Name, d) }

// LookupDeploy returns the deploy interface called name.
func LookupDeploy(name string) (DeployInterface, error) {
	implMu.RLock()
	defer implMu.RUnlock()
	d, ok := deploys[name]
	if !ok {
		return DeployInterface{}, fmt.Errorf("deploy interface %q is not available", name)
	}
	return d, nil
}
