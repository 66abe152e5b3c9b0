#!/bin/sh
# inputs.sh AGENT_PKG KERNEL_DIR — prints one hash over everything the
# initramfs is built from, so that `make initramfs` rebuilds it only when one
# of them changed: the Go files (and embedded files) of every package of this
# module that AGENT_PKG imports, go.mod and go.sum, the u-root tools module,
# build.sh itself, the kernel, modules and pci.ids fetch-kernel.sh wrote into
# KERNEL_DIR (which follow initramfs/modules.txt and the pinned kernel), the
# mdadm binary build.sh copies in, the Go version, and ZSTD_LEVEL.
set -eu
agent=${1:?usage: inputs.sh AGENT_PKG KERNEL_DIR}
kdir=${2:?usage: inputs.sh AGENT_PKG KERNEL_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
kdir=$(cd "$kdir" && pwd)
cd "$root"
tmpl='{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}'
{
	echo "ZSTD_LEVEL=${ZSTD_LEVEL:-19} agent=$agent"
	go env GOVERSION
	{
		CGO_ENABLED=0 GOOS=linux go list -deps -f "$tmpl" "$agent"
		echo "$root/go.mod"
		echo "$root/go.sum"
		echo "$root/initramfs/build.sh"
		PATH=$PATH:/usr/sbin:/sbin command -v mdadm || :
		find "$root/initramfs/tools" "$kdir/vmlinuz" "$kdir/modules" "$kdir/pci.ids.gz" -type f
	} | LC_ALL=C sort -u | while read -r f; do
		# Named relative to the kernel directory or the repository, so that
		# the same inputs in another directory (a test's temporary kernel
		# directory, another clone) give the same hash.
		case $f in
		"$kdir"/*) name=kernel/${f#"$kdir"/} ;;
		"$root"/*) name=${f#"$root"/} ;;
		*) name=$f ;;
		esac
		echo "$(sha256sum <"$f" | cut -d' ' -f1) $name"
	done
} | sha256sum | cut -d' ' -f1
