// Package coreos is the install_coreos deploy step: the hardware manager
// Metal3's baremetal-operator asks for (through the custom-agent deploy
// interface, at priority 80) to install Fedora/RHEL CoreOS with an Ignition
// config instead of writing a generic image.
//
// The step reads what Metal3 sends: node.instance_info.configdrive as a dict
// (user_data is the Ignition config, meta_data.coreos_append_karg a list of
// kernel arguments, meta_data.coreos_copy_network a boolean that defaults to
// true) and instance_info.image_source with its checksum.
//
// The Ignition config is validated before anything is written, so a bad
// config fails the step with the disk untouched. Then, when a coreos-installer
// binary is in PATH, it runs it with the arguments Metal3's
// CoreOSInstallHardwareManager uses. Otherwise (the default in a Kiln
// ramdisk) the native path does the same work in Go: the metal image is
// streamed onto the root disk by agent/image (raw, gzip, xz, zstd or qcow2,
// checksum verified), the partition labelled "boot" is mounted with the
// kernel's ext4 driver and receives ignition/config.ign, the first-boot
// stamp, the extra kernel arguments on the default boot loader entry and the
// ramdisk's NetworkManager keyfiles in coreos-firstboot-network/.
package coreos
