package steps

import "github.com/kilnhq/kiln/agent/disk"

// Safety guards destructive steps: inside the ramdisk every device is fair
// game (the machine is being provisioned); outside it — a developer running
// the agent on a workstation — only the devices given with --allow-device.
// It is the disk packages' Guard itself, so the rule is written once and
// steps hand it to disk code without converting.
type Safety = disk.Guard
