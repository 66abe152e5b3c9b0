#!/bin/sh
# mkagentiso.sh KERNEL INITRAMFS OUTPUT CMDLINE — a UEFI-bootable agent ISO
# for redfish-virtual-media (driver_info deploy_iso), without root.
#
# Kiln does not build per-node ISOs yet: the kernel arguments the agent needs
# (ipa-api-url, ipa-advertise-*) are baked in here, in a UKI (systemd-boot's
# stub + kernel + initramfs + CMDLINE) at \EFI\BOOT\BOOTX64.EFI of a FAT image
# that is the ISO's El Torito EFI boot image. The agent finds its node by
# lookup with its MACs. Needs: mtools, dosfstools, binutils, xorriso,
# systemd-boot-efi.
set -eu
# sgdisk, mkfs.vfat and friends are in /usr/sbin or /sbin, off a normal user's PATH.
PATH=$PATH:/usr/sbin:/sbin
export PATH

kernel=${1:?usage: mkagentiso.sh KERNEL INITRAMFS OUTPUT CMDLINE}
initramfs=${2:?usage: mkagentiso.sh KERNEL INITRAMFS OUTPUT CMDLINE}
output=${3:?usage: mkagentiso.sh KERNEL INITRAMFS OUTPUT CMDLINE}
cmdline=${4:?usage: mkagentiso.sh KERNEL INITRAMFS OUTPUT CMDLINE}
stub=${UKI_STUB:-/usr/lib/systemd/boot/efi/linuxx64.efi.stub}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-agent-iso.XXXXXX")
trap 'rm -rf "$work"' EXIT

printf 'NAME="Kiln agent"\nID=kiln-agent\n' >"$work/os-release"
printf '%s' "$cmdline" >"$work/cmdline"
# The kernel is < 16 MiB, so the initrd section at +16 MiB does not overlap it.
objcopy \
	--add-section .osrel="$work/os-release" --change-section-vma .osrel=0x20000 \
	--add-section .cmdline="$work/cmdline" --change-section-vma .cmdline=0x30000 \
	--add-section .linux="$kernel" --change-section-vma .linux=0x2000000 \
	--add-section .initrd="$initramfs" --change-section-vma .initrd=0x3000000 \
	"$stub" "$work/uki.efi"

mkdir -p "$work/iso"
size=$(( $(stat -c %s "$work/uki.efi") / 1048576 + 4 ))
truncate -s "${size}M" "$work/iso/efiboot.img"
mkfs.vfat -n KILNAGENT "$work/iso/efiboot.img" >/dev/null
export MTOOLS_SKIP_CHECK=1
mmd -i "$work/iso/efiboot.img" ::/EFI ::/EFI/BOOT
mcopy -i "$work/iso/efiboot.img" "$work/uki.efi" ::/EFI/BOOT/BOOTX64.EFI
xorriso -as mkisofs -quiet -o "$output.tmp" -V KILN_AGENT -J -R \
	-e efiboot.img -no-emul-boot "$work/iso" 2>/dev/null
mv "$output.tmp" "$output"
