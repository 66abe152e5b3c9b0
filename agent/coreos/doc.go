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
//
// What the native path does not reproduce of coreos-installer (and of
// Metal3's manager around it):
//
//   - GPG signature verification of the image (coreos-installer needs
//     --insecure for a bare URL anyway); the native path verifies the
//     instance_info checksum instead, which coreos-installer ignores.
//   - Checking that the image's sector size matches the disk's (4Kn disks
//     need the 4Kn metal image); --save-partlabel/--save-partindex;
//     --platform, --delete-karg, --ignition-hash and other options Metal3
//     does not pass; s390x DASD/zipl handling; udev settling.
//   - On a failure after the image is written, coreos-installer without
//     --preserve-on-error clears the partition table; Metal3 passes
//     --preserve-on-error, and so the native path leaves the disk as is
//     (a failed image write itself still scrubs the disk's first and last
//     MiB, agent/image's rule).
//   - A missing ignition.firstboot is created (coreos-installer fails when
//     it must append first-boot arguments to a missing one); a missing
//     NetworkManager directory copies nothing (coreos-installer fails).
//   - Metal3's manager also deletes software RAID first, adds the ramdisk
//     hostname to the Ignition config as /etc/hostname, appends
//     $IPA_COREOS_IP_OPTIONS and adds a UEFI boot entry in UEFI mode; Kiln
//     leaves RAID to the raid steps, the boot entry to the controller's
//     boot device setting, and has no hostname or IP-options environment.
package coreos
