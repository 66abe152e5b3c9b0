// Package disk is the agent's view of block devices: what disks the machine
// has (read from sysfs, because the ramdisk has no udev database), a Guard
// that keeps destructive calls off disks nobody meant to touch, and the
// partition work done after an image is written (re-reading the table,
// moving the backup GPT to the real end of the disk, finding the root and
// EFI partitions, writing the config drive).
//
// Root device hints live in agent/disk/hints and erasing in
// agent/disk/erase; both build on the Device and Guard defined here.
// Nothing in this package depends on the agent runtime: the step layer
// calls it with paths and plain values.
package disk
