#!/bin/sh
# mkimage.sh KERNEL_DIR OUTDIR IMAGE_ID — a whole-disk test image that boots
# under BIOS (SeaBIOS → gptmbr → SYSLINUX) and UEFI (OVMF → \EFI\BOOT\BOOTX64.EFI,
# a UKI), built without root, loop devices or mounts.
#
# KERNEL_DIR is what scripts/fetch-kernel.sh wrote (vmlinuz, modules/).
# Writes OUTDIR/IMAGE_ID.raw (GPT: one 64 MiB ESP, legacy-BIOS-bootable),
# OUTDIR/IMAGE_ID.qcow2 and OUTDIR/IMAGE_ID.raw.zst, and for each FILE a
# FILE.sha256 holding its hex SHA-256.
#
# The OS is test/e2e/deployedos as /init of a small initramfs with the virtio
# block modules; kernel argument kiln.e2e.image=IMAGE_ID names the image in
# the marker line it prints. Needs: go, cpio, gzip, mtools, dosfstools, gdisk,
# binutils (objcopy), syslinux + syslinux-common, systemd-boot-efi, qemu-utils, zstd.
set -eu
# sgdisk, mkfs.vfat and friends are in /usr/sbin or /sbin, off a normal user's PATH.
PATH=$PATH:/usr/sbin:/sbin
export PATH

kdir=${1:?usage: mkimage.sh KERNEL_DIR OUTDIR IMAGE_ID}
out=${2:?usage: mkimage.sh KERNEL_DIR OUTDIR IMAGE_ID}
id=${3:?usage: mkimage.sh KERNEL_DIR OUTDIR IMAGE_ID}
root=$(cd "$(dirname "$0")/../.." && pwd)
stub=${UKI_STUB:-/usr/lib/systemd/boot/efi/linuxx64.efi.stub}
gptmbr=${GPTMBR:-/usr/lib/syslinux/mbr/gptmbr.bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
kdir=$(cd "$kdir" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-e2e-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. initramfs: /init and the virtio block modules in load order.
stage=$work/stage
mkdir -p "$stage/lib/kiln/modules"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$stage/init" ./test/e2e/deployedos)
: >"$stage/lib/kiln/modules/order"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk; do
	cp "$kdir/modules/$m.ko" "$stage/lib/kiln/modules/"
	echo "$m.ko" >>"$stage/lib/kiln/modules/order"
done
(cd "$stage" && find . | sort | cpio -o -H newc -R 0:0 --quiet | gzip -9 >"$work/initrd.gz")

cmdline="console=ttyS0,115200 quiet kiln.e2e.image=$id"

# 2. UKI: the systemd-boot stub with kernel, initrd and command line sections.
printf 'NAME="Kiln e2e test OS"\nID=kiln-e2e\nVERSION_ID=%s\n' "$id" >"$work/os-release"
printf '%s' "$cmdline" >"$work/cmdline"
objcopy \
	--add-section .osrel="$work/os-release" --change-section-vma .osrel=0x20000 \
	--add-section .cmdline="$work/cmdline" --change-section-vma .cmdline=0x30000 \
	--add-section .linux="$kdir/vmlinuz" --change-section-vma .linux=0x2000000 \
	--add-section .initrd="$work/initrd.gz" --change-section-vma .initrd=0x3000000 \
	"$stub" "$work/uki.efi"

# 3. ESP (FAT32): the UKI at the removable-media path, and for BIOS the kernel,
# initrd and SYSLINUX (installed through mtools, no mount).
esp=$work/esp.img
truncate -s 64M "$esp"
mkfs.vfat -F 32 -n ESP "$esp" >/dev/null
export MTOOLS_SKIP_CHECK=1
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/syslinux
mcopy -i "$esp" "$work/uki.efi" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$esp" "$kdir/vmlinuz" ::/vmlinuz
mcopy -i "$esp" "$work/initrd.gz" ::/initrd.gz
cat >"$work/syslinux.cfg" <<EOF
SERIAL 0 115200
DEFAULT os
PROMPT 0
TIMEOUT 0
LABEL os
  LINUX /vmlinuz
  INITRD /initrd.gz
  APPEND $cmdline
EOF
mcopy -i "$esp" "$work/syslinux.cfg" ::/syslinux/syslinux.cfg
syslinux --install --directory /syslinux "$esp"

# 4. The disk: GPT with the ESP at 1 MiB, marked legacy-BIOS-bootable, a
# small ext4 root partition (the agent reports the root partition's UUID, as
# for any whole-disk OS image), and SYSLINUX's GPT-aware MBR boot code.
img=$work/$id.raw
truncate -s 70M "$img"
sgdisk -o -n 1:2048:+64M -t 1:ef00 -c 1:ESP -A 1:set:2 -n 2:0:+4M -t 2:8304 -c 2:root "$img" >/dev/null
dd if="$esp" of="$img" bs=1M seek=1 conv=notrunc,sparse status=none
truncate -s 4M "$work/root.img"
mkfs.ext4 -q -F -L root "$work/root.img"
dd if="$work/root.img" of="$img" bs=1M seek=65 conv=notrunc,sparse status=none
dd if="$gptmbr" of="$img" bs=440 count=1 conv=notrunc status=none

# 5. The formats the tests deploy.
qemu-img convert -f raw -O qcow2 "$img" "$work/$id.qcow2"
zstd -q -f -T0 -10 "$img" -o "$work/$id.raw.zst"
for f in "$id.raw" "$id.qcow2" "$id.raw.zst"; do
	mv "$work/$f" "$out/$f"
	sha256sum "$out/$f" | cut -d' ' -f1 >"$out/$f.sha256"
done
echo "mkimage.sh: $out/$id.{raw,qcow2,raw.zst}: $(stat -c %s "$out/$id.qcow2") bytes qcow2, $(stat -c %s "$out/$id.raw.zst") bytes zst" >&2
