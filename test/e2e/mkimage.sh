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
#
# The images are cached by their inputs in $KILN_CACHE/e2e-images/<hash>/
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/kiln): the hash covers this
# script, IMAGE_ID, deployedos's Go sources, go.mod/go.sum, the Go version,
# the kernel and the modules copied, the UKI stub, gptmbr.bin and syslinux.
# A cached build is copied into OUTDIR; a new one is built in a temporary
# directory and renamed into the cache whole, so concurrent builds never see
# a half-written image. Entries unused for 14 days are removed.
# KILN_IMAGE_CACHE=0 builds without the cache.
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
modules="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
files="$id.raw $id.qcow2 $id.raw.zst"

# copy_out DIR: the images and their .sha256 files from DIR into OUTDIR.
copy_out() {
	for f in $files; do
		cp --sparse=always "$1/$f" "$out/$f.tmp" && mv "$out/$f.tmp" "$out/$f"
		cp "$1/$f.sha256" "$out/$f.sha256"
	done
	echo "mkimage.sh: $out/$id.{raw,qcow2,raw.zst}: $(stat -c %s "$out/$id.qcow2") bytes qcow2, $(stat -c %s "$out/$id.raw.zst") bytes zst${2:-}" >&2
}

# inputs: one hash over everything the images are built from.
inputs() {
	tmpl='{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}'
	{
		echo "id=$id"
		(cd "$root" && go env GOVERSION)
		{
			(cd "$root" && CGO_ENABLED=0 go list -deps -f "$tmpl" ./test/e2e/deployedos)
			echo "$root/go.mod"
			echo "$root/go.sum"
			echo "$root/test/e2e/mkimage.sh"
			echo "$kdir/vmlinuz"
			for m in $modules; do echo "$kdir/modules/$m.ko"; done
			echo "$stub"
			echo "$gptmbr"
			command -v syslinux
		} | LC_ALL=C sort -u | while read -r f; do
			# Named relative to the kernel directory or the repository, so
			# that another clone or kernel directory shares the entry.
			case $f in
			"$kdir"/*) name=kernel/${f#"$kdir"/} ;;
			"$root"/*) name=${f#"$root"/} ;;
			*) name=$f ;;
			esac
			echo "$(sha256sum <"$f" | cut -d' ' -f1) $name"
		done
	} | sha256sum | cut -d' ' -f1
}

entry=""
if [ "${KILN_IMAGE_CACHE:-1}" != 0 ]; then
	cache=${KILN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}/e2e-images
	mkdir -p "$cache"
	entry=$cache/$(inputs)
	if [ -f "$entry/.done" ]; then
		touch "$entry"
		copy_out "$entry" " (cached: $entry)"
		exit 0
	fi
	find "$cache" -mindepth 1 -maxdepth 1 -type d -mtime +14 -exec rm -rf {} + 2>/dev/null || :
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-e2e-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. initramfs: /init and the virtio block modules in load order.
stage=$work/stage
mkdir -p "$stage/lib/kiln/modules"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$stage/init" ./test/e2e/deployedos)
: >"$stage/lib/kiln/modules/order"
for m in $modules; do
	cp "$kdir/modules/$m.ko" "$stage/lib/kiln/modules/"
	echo "$m.ko" >>"$stage/lib/kiln/modules/order"
done
(cd "$stage" && find . | sort | cpio -o -H newc -R 0:0 --quiet | gzip -9 >"$work/initrd.gz")

# no_timer_check: the deployed OS boots under TCG on a busy host too (see
# guestKernelArgs in harness_test.go).
cmdline="console=ttyS0,115200 quiet no_timer_check kiln.e2e.image=$id"

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
built=$work/built
mkdir "$built"
for f in $files; do
	mv "$work/$f" "$built/$f"
	sha256sum "$built/$f" | cut -d' ' -f1 >"$built/$f.sha256"
done
touch "$built/.done"
if [ -n "$entry" ]; then
	# Into the cache whole: a rename onto the entry fails when another build
	# finished first, and then its images are used and these dropped.
	new=$(mktemp -d "$cache/.new.XXXXXX")
	mv "$built"/* "$built/.done" "$new/"
	mv -T "$new" "$entry" 2>/dev/null || rm -rf "$new"
	[ -f "$entry/.done" ] || { echo "mkimage.sh: $entry: not complete after rename" >&2; exit 1; }
	built=$entry
fi
copy_out "$built"
