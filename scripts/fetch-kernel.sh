#!/bin/sh
# fetch-kernel.sh OUTDIR — the agent's kernel and modules from Debian.
#
# Downloads Debian's pinned linux-image and pci.ids packages with apt (cached under
# $KILN_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/kiln), and writes:
#   OUTDIR/vmlinuz                 the kernel (bzImage, EFI stub)
#   OUTDIR/modules/*.ko            the modules in initramfs/modules.txt and
#                                  everything they depend on
#   OUTDIR/modules/order           their file names, one a line, in an order in
#                                  which each module's dependencies come first
#   OUTDIR/modules/version         the kernel release (uname -r)
#   OUTDIR/modules/deps            "FILE: DEP…" per module (depmod's modules.dep
#                                  in file names), and
#   OUTDIR/modules/aliases         "FILE PATTERN" per device alias on the pci,
#                                  virtio, usb and scsi buses: the program loads
#                                  a device driver only when a device matches
#                                  (initramfs/modload), as udev would
#   OUTDIR/pci.ids.gz              Debian's pci.ids (pinned), for PCI inventory
# Debian's kernel builds storage and NIC drivers as modules and does not mount
# devtmpfs itself; the initramfs's program loads OUTDIR/modules in order.
#
# Exit status 75 (EX_TEMPFAIL) means a package could not be downloaded
# (offline, or apt's lists not updated): tests skip on it rather than fail.
#
# Several builds may share the cache at once (two checkouts, a test and
# `make initramfs`): every cache entry is written under a temporary name and
# renamed into place, so none sees another's half-written files.
set -eu
# depmod and modprobe are in /usr/sbin or /sbin, not on a normal user's PATH.
PATH=$PATH:/usr/sbin:/sbin
export PATH

KERNEL_ABI=${KERNEL_ABI:-6.1.0-57-amd64}
KERNEL_DEB_VERSION=${KERNEL_DEB_VERSION:-6.1.192-3}
PCIIDS_DEB_VERSION=${PCIIDS_DEB_VERSION:-0.0~2023.04.11-1}
out=${1:?usage: fetch-kernel.sh OUTDIR}
here=$(cd "$(dirname "$0")/.." && pwd)
list=${MODULES_LIST:-$here/initramfs/modules.txt}
cache=${KILN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}
pkg=linux-image-$KERNEL_ABI

mkdir -p "$cache" "$out"

# fetch_deb PKG VERSION ARCH: download PKG=VERSION into the cache once; prints the path.
fetch_deb() {
	f=$cache/${1}_$(echo "$2" | sed 's/^[0-9]*://')_$3.deb
	if [ ! -s "$f" ]; then
		echo "fetch-kernel: downloading $1=$2" >&2
		tmp=$(mktemp -d "$cache/dl.XXXXXX")
		# apt-get download writes into the current directory; as root into a
		# directory _apt cannot read it warns "unsandboxed", harmlessly.
		(cd "$tmp" && apt-get download "$1=$2" 2>&1 | grep -v unsandboxed >&2) || :
		if [ ! -s "$tmp/$(basename "$f")" ]; then
			echo "fetch-kernel: apt-get download $1=$2 failed (offline, or run apt-get update?)" >&2
			rm -rf "$tmp"
			exit 75
		fi
		mv "$tmp/$(basename "$f")" "$f"
		rm -rf "$tmp"
	fi
	echo "$f"
}

deb=$(fetch_deb "$pkg" "$KERNEL_DEB_VERSION" amd64)
pciids_deb=$(fetch_deb pci.ids "$PCIIDS_DEB_VERSION" all)

root=$cache/root-$KERNEL_ABI-$KERNEL_DEB_VERSION
if [ ! -f "$root/.done" ]; then
	# An unfinished tree left by an older version of this script: move it
	# aside first (rename is atomic, so only one build removes it).
	if [ -d "$root" ]; then
		old=$(mktemp -u "$cache/stale.XXXXXX")
		mv -T "$root" "$old" 2>/dev/null && rm -rf "$old"
	fi
	tmp=$(mktemp -d "$cache/root.XXXXXX")
	dpkg-deb -x "$deb" "$tmp"
	# The package ships no modules.dep; build one for modprobe below.
	depmod -b "$tmp" "$KERNEL_ABI"
	touch "$tmp/.done"
	# Another build may have finished first; then its tree is used and ours dropped.
	mv -T "$tmp" "$root" 2>/dev/null || rm -rf "$tmp"
	[ -f "$root/.done" ] || { echo "fetch-kernel: $root: not complete after rename" >&2; exit 1; }
fi

cp "$root/boot/vmlinuz-$KERNEL_ABI" "$out/vmlinuz"
rm -rf "$out/modules"
mkdir -p "$out/modules"
: >"$out/modules/order"
grep -v '^[[:space:]]*#' "$list" | while read -r name; do
	[ -n "$name" ] || continue
	if ! deps=$(modprobe -d "$root" -S "$KERNEL_ABI" --show-depends "$name" 2>/dev/null); then
		echo "fetch-kernel: $name: not in $pkg, skipped" >&2
		continue
	fi
	echo "$deps" | while read -r verb path _; do
		[ "$verb" = insmod ] || continue # "builtin NAME" needs nothing
		f=$(basename "$path")
		grep -qx "$f" "$out/modules/order" && continue
		cp "$path" "$out/modules/$f"
		echo "$f" >>"$out/modules/order"
	done
done
echo "$KERNEL_ABI" >"$out/modules/version"
mdir=$root/lib/modules/$KERNEL_ABI
awk 'FNR == NR { have[$0] = 1; next }
{
	n = split($1, p, "/"); f = p[n]; sub(/:$/, "", f)
	if (!(f in have)) next
	line = f ":"
	for (i = 2; i <= NF; i++) { n = split($i, p, "/"); line = line " " p[n] }
	print line
}' "$out/modules/order" "$mdir/modules.dep" >"$out/modules/deps"
awk 'FNR == NR { m = $0; sub(/\.ko$/, "", m); gsub(/-/, "_", m); file[m] = $0; next }
$1 == "alias" && ($3 in file) && $2 ~ /^(pci|virtio|usb|scsi):/ { print file[$3], $2 }' \
	"$out/modules/order" "$mdir/modules.alias" >"$out/modules/aliases"

# pci.ids, gzipped, for the agent's PCI inventory (ghw/pcidb read .gz).
dpkg-deb --fsys-tarfile "$pciids_deb" | tar -xO ./usr/share/misc/pci.ids | gzip -9n >"$out/pci.ids.gz"
echo "fetch-kernel: $(wc -l <"$out/modules/order") modules, $(du -sk "$out/modules" | cut -f1) KiB; vmlinuz $(stat -c %s "$out/vmlinuz") bytes" >&2
