#!/bin/sh
# vmtest.sh PKG [RUN] — run the Go tests of PKG as root inside a QEMU VM
# booted with the agent's kernel (out/kernel, `make kernel`), for tests that
# need kernel features the host may lack (md software RAID: agent/raid).
# The VM's initramfs holds the test binary, scripts/vmtest as init, the
# kernel's modules plus loop, and the host tools the tests run (with the
# libraries they link). RUN is a -test.run pattern. Exits with the tests'
# status; the console is copied to stdout.
set -eu
PATH=$PATH:/usr/sbin:/sbin
pkg=${1:?usage: vmtest.sh PKG [RUN]}
runpat=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
kdir=${KERNEL_DIR:-$root/out/kernel}
[ -f "$kdir/vmlinuz" ] || { echo "vmtest.sh: no kernel in $kdir: run make kernel" >&2; exit 2; }
tools=${VMTEST_TOOLS:-"mdadm losetup wipefs sgdisk blockdev mkfs.vfat mmd mcopy"}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-vmtest.XXXXXX")
trap 'rm -rf "$work"' EXIT
img=$work/root
mkdir -p "$img/usr/sbin" "$img/lib/kiln"

cd "$root"
CGO_ENABLED=0 go test -c -o "$img/vmtest.test" "$pkg"
CGO_ENABLED=0 go build -o "$img/init" ./scripts/vmtest

# Tools and the shared libraries they link, at their host paths.
for t in $tools; do
	p=$(command -v "$t") || { echo "vmtest.sh: $t is not installed" >&2; exit 2; }
	cp "$p" "$img/usr/sbin/$t"
	for lib in $(ldd "$p" 2>/dev/null | grep -o '/[^ ]*'); do
		mkdir -p "$img$(dirname "$lib")"
		cp -L "$lib" "$img$lib"
	done
done

# Modules: those `make kernel` ships, then loop.
cp -r "$kdir/modules" "$img/lib/kiln/modules"
loop=$(find "$(dirname "$(readlink -f "$kdir/vmlinuz")")/.." "${KILN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}" -name loop.ko 2>/dev/null | head -n 1)
if [ -n "$loop" ]; then
	cp "$loop" "$img/lib/kiln/modules/loop.ko"
	echo loop.ko >>"$img/lib/kiln/modules/order"
fi

(cd "$img" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initrd"
# TCG by default: nested KVM (a CI VM) can hang without a word.
kvm="-cpu max"
[ "${VMTEST_KVM:-}" = 1 ] && kvm="-enable-kvm -cpu host"
# shellcheck disable=SC2086
timeout "${VMTEST_TIMEOUT:-600}" qemu-system-x86_64 -machine q35 $kvm -m "${VMTEST_MEM:-3072}" -smp 2 -nographic -no-reboot \
	-kernel "$kdir/vmlinuz" -initrd "$work/initrd" \
	-append "console=ttyS0 loglevel=4 panic=-1 no_timer_check vmtest.run=$runpat" </dev/null | tee "$work/console"
status=$(sed -n 's/^VMTEST EXIT \([0-9]*\).*/\1/p' "$work/console" | tail -n 1)
[ -n "$status" ] || { echo "vmtest.sh: the VM printed no exit status" >&2; exit 2; }
exit "$status"
