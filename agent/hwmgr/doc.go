// Package hwmgr is kiln-agent's generic hardware manager: the disk and image
// steps IPA's GenericHardwareManager offers, built on agent/disk and
// agent/image.
//
//   - clean steps erase_devices_metadata (priority 99), erase_devices (10) and
//     erase_devices_express (0);
//   - deploy steps erase_devices_metadata (0) and inject_files (0);
//   - the image writer behind the deploy step write_image and
//     standby.prepare_image (Manager.WriteImage, the runtime's
//     Deps.WriteImage): stream the image onto the root device, verify its
//     checksum, fix the GPT, find the partition UUIDs, write the config drive;
//     for image_type partition, make IPA's partition table first and stream
//     the image into the root partition;
//   - image.install_bootloader (Manager.InstallBootloader): a UEFI boot
//     entry for the loader on the image's ESP, through efivarfs; for BIOS
//     partition images, the image's own GRUB installed from a chroot.
//
// Wiring, in agent/cmd/kiln-agent:
//
//	hw := hwmgr.New(hwmgr.Options{Log: log})
//	deps.WriteImage = hw.WriteImage
//	deps.InstallBootloader = hw.InstallBootloader
//	deps.Steps = hw.Steps()
//
// Every destructive operation checks the runtime's steps.Safety first: inside
// the ramdisk every local disk may be written, outside it only the devices
// given with --allow-device. Outside a ramdisk the candidates for the root
// device and for the erase steps are the allowed devices only, so a step can
// never pick a workstation's own disk.
package hwmgr
