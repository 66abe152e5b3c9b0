#!/bin/sh
# Runs the agent/netconf tests inside a QEMU VM booted with a stock Debian
# kernel, whose bonding and 8021q modules the bond/VLAN test needs when the
# host kernel has neither (the test skips there).
#
# usage: agent/netconf/testdata/vmtest.sh KERNEL_ROOT [TEST_PATTERN]
#   KERNEL_ROOT: a linux-image .deb unpacked with dpkg -x (boot/vmlinuz-*,
#   lib/modules/*), e.g. from `apt-get download linux-image-6.1.0-57-amd64`.
# Needs qemu-system-x86, cpio, iproute2. Runs under TCG with -cpu max: the
# guest needs RDRAND, or getrandom() (DHCP transaction IDs) blocks for minutes
# on a fresh VM without entropy.
set -eu
kroot=$1
pattern=${2:-.}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
vmlinuz=$(ls "$kroot"/boot/vmlinuz-* | head -n1)
mods=$(ls -d "$kroot"/lib/modules/* | head -n1)/kernel
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
r=$work/root
mkdir -p "$r/modules" "$r/usr/bin" "$r/bin" "$r/sbin" "$r/etc" "$r/var"
: >"$r/modules/order"
for m in net/tls/tls.ko: drivers/net/bonding/bonding.ko:max_bonds=0 net/llc/llc.ko: net/802/mrp.ko: \
	net/802/stp.ko: net/802/garp.ko: net/8021q/8021q.ko: drivers/net/veth.ko: net/bridge/bridge.ko:; do
	path=${m%%:*}
	params=${m#*:}
	cp "$mods/$path" "$r/modules/"
	echo "$(basename "$path") $params" >>"$r/modules/order"
done
cp /usr/bin/ip "$r/usr/bin/ip"
ln -s /usr/bin/ip "$r/sbin/ip"
ln -s /usr/bin/ip "$r/bin/ip"
for lib in $(ldd /usr/bin/ip | grep -o '/lib[^ ]*'); do
	mkdir -p "$r$(dirname "$lib")"
	cp -L "$lib" "$r$lib"
done
echo "root:x:0:0::/:/bin/sh" >"$r/etc/passwd"
cd "$repo"
CGO_ENABLED=0 go build -o "$r/init" ./agent/netconf/internal/vminit
CGO_ENABLED=0 go test -c -o "$r/netconf.test" ./agent/netconf
(cd "$r" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"
timeout 600 qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 1 -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet kiln.run=$pattern" -nographic -no-reboot -nic none >"$work/log" 2>&1 || true
grep -E '^(--- |PASS|FAIL|ok)|_test.go:|KILN-VM-RESULT' "$work/log" || true
grep -q 'KILN-VM-RESULT: ok' "$work/log"
