#!/bin/sh
# build.sh KERNEL_DIR AGENT_PKG OUTPUT — the agent's initramfs.
#
# KERNEL_DIR is what scripts/fetch-kernel.sh wrote (modules/, pci.ids.gz).
# AGENT_PKG is the Go package u-root's init starts as its uinit (kiln-agent, or
# ./initramfs/testinit for boot tests), as a path relative to the repo root.
# OUTPUT is written zstd-compressed. Environment: MKUIMAGE (the mkuimage
# binary; built from initramfs/tools when unset), ZSTD_LEVEL (default 19).
#
# The image: u-root's init (mounts proc, sys, devtmpfs; starts the program;
# then a shell on the console), gosh and diagnostic commands (below), the
# kernel modules under /lib/kiln/modules with their load order (the program
# loads them, see initramfs/modload), /usr/share/misc/pci.ids.gz, and mdadm
# (Debian's, with the libraries it links) for software RAID (agent/raid).
set -eu
PATH=$PATH:/usr/sbin:/sbin
export PATH

kdir=${1:?usage: build.sh KERNEL_DIR AGENT_PKG OUTPUT}
agent=${2:?usage: build.sh KERNEL_DIR AGENT_PKG OUTPUT}
output=${3:?usage: build.sh KERNEL_DIR AGENT_PKG OUTPUT}
root=$(cd "$(dirname "$0")/.." && pwd)
kdir=$(cd "$kdir" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-initramfs.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Commands for the console, besides init and the program. Every one must be
# blank-imported in initramfs/tools/tools.go.
cmds="init gosh blkid cat cp dd df dhclient dmesg echo free gpt grep hexdump
insmod ip kill ls lsmod mkdir more mount pci ping poweroff ps rm shutdown sync
tail umount uname wget"
pkgs=""
for c in $cmds; do pkgs="$pkgs github.com/u-root/u-root/cmds/core/$c"; done
pkgs="$pkgs github.com/u-root/u-root/cmds/exp/dmidecode"

# mdadm builds software RAID; mkuimage adds the libraries it links.
mdadm=$(command -v mdadm) || { echo "build.sh: mdadm is not installed (apt-get install mdadm)" >&2; exit 1; }

mkuimage=${MKUIMAGE:-}
if [ -z "$mkuimage" ]; then
	mkuimage=$work/mkuimage
	(cd "$root/initramfs/tools" && go build -o "$mkuimage" github.com/u-root/mkuimage/cmd/mkuimage)
fi

# mkuimage finds commands through the Go module graph: a workspace joining the
# repo (the program) with the tools module (u-root) serves both without
# putting u-root's build dependencies into Kiln's go.mod.
# Its go line is the newer of the two go.mod files' (a workspace may not be
# older than its modules), so that any toolchain they accept builds it: a
# newer line would fail with GOTOOLCHAIN=local, or download a toolchain.
gover=$(sed -n 's/^go[[:space:]]\{1,\}\([0-9.]*\)[[:space:]]*$/\1/p' "$root/go.mod" "$root/initramfs/tools/go.mod" | sort -V | tail -n 1)
[ -n "$gover" ] || { echo "build.sh: no go line in $root/go.mod" >&2; exit 1; }
cat >"$work/go.work" <<EOW
go $gover

use (
	$root
	$root/initramfs/tools
)
EOW

case $agent in
/* | ./* | ../*) ;;
github.com/*) ;;
*) agent=./$agent ;;
esac
name=$(basename "$agent")

(cd "$root" && GOWORK=$work/go.work CGO_ENABLED=0 "$mkuimage" \
	-o "$work/initramfs.cpio" \
	-initcmd=init -uinitcmd="$name" -defaultsh=gosh \
	-files "$kdir/modules:lib/kiln/modules" \
	-files "$kdir/pci.ids.gz:usr/share/misc/pci.ids.gz" \
	-files "$mdadm:usr/sbin/mdadm" \
	$pkgs "$agent")

# Written under a name of its own and renamed: a concurrent build of the same
# OUTPUT (a shared cache) never sees a half-written file, nor removes ours.
mkdir -p "$(dirname "$output")"
tmp=$(mktemp "$(dirname "$output")/.$(basename "$output").XXXXXX")
zstd -q -f -T0 "-${ZSTD_LEVEL:-19}" "$work/initramfs.cpio" -o "$tmp" || { rm -f "$tmp"; exit 1; }
chmod 644 "$tmp"
mv "$tmp" "$output"
echo "build.sh: $output: $(stat -c %s "$output") bytes (cpio $(stat -c %s "$work/initramfs.cpio"))" >&2
