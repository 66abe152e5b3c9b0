#!/bin/bash
# qemu-lab.sh — the real kiln-agent in its real initramfs, booted in QEMU
# (TCG is enough), driven by a real `kiln serve` through inspection,
# automated cleaning and a deploy: modules, DHCP, lookup, inventory, erase,
# write_image onto the VM's virtio disk, config drive, partition UUIDs.
# Manual (about 2 minutes with a warm Go cache, most of it the u-root build);
# the CI-run end-to-end tests are the Go tests next to this script.
#
#   test/agente2e/qemu-lab.sh [WORKDIR]
#
# Needs qemu-system-x86_64, sgdisk, mkfs.ext4, wipefs, python3, curl, and what
# scripts/fetch-kernel.sh and initramfs/build.sh need.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/kiln-qemu-lab.XXXXXX")}
mkdir -p "$work"
cd "$work"
KP=16400 IP=16401 HF=16402
MAC=52:54:00:12:34:56

"$repo/scripts/fetch-kernel.sh" "$work/kernel"
[ -f initramfs.zst ] || ZSTD_LEVEL=3 "$repo/initramfs/build.sh" "$work/kernel" ./agent/cmd/kiln-agent "$work/initramfs.zst"
(cd "$repo" && go build -o "$work/kiln" ./controller/cmd/kiln)

# A 24 MiB GPT image: ESP + ext4 root; a 512 MiB disk for the VM.
rm -f image.raw disk.raw k.db
truncate -s 24M image.raw
sgdisk -n1:2048:+4M -t1:EF00 -n2:0:0 -t2:8300 -c2:root image.raw >/dev/null
mkdir -p root/etc && echo ID=qemulab >root/etc/os-release
mkfs.ext4 -q -F -d root -E offset=$((10240 * 512)) image.raw 16M
SUM=$(sha256sum image.raw | cut -d' ' -f1)
truncate -s 512M disk.raw

python3 -m http.server $IP --bind 127.0.0.1 >http.log 2>&1 &
HP=$!
# QEMU's user network reaches the host's 127.0.0.1 as 10.0.2.2.
./kiln serve --listen 127.0.0.1:$KP --db "$work/k.db" --power-sync-interval 0 --api-url http://10.0.2.2:$KP >kiln.log 2>&1 &
KLP=$!
trap 'kill $HP $KLP 2>/dev/null || true' EXIT
sleep 1
H=(-H X-OpenStack-Ironic-API-Version:1.95 -H Content-Type:application/json)
A=http://127.0.0.1:$KP
field() { python3 -c "import sys,json;n=json.load(sys.stdin);print($1)"; }
U=$(curl -s "${H[@]}" -d '{"driver":"fake-hardware","deploy_interface":"direct","inspect_interface":"agent","name":"qemu"}' $A/v1/nodes | field 'n["uuid"]')
curl -s "${H[@]}" -d "{\"node_uuid\":\"$U\",\"address\":\"$MAC\"}" $A/v1/ports >/dev/null
provision() { curl -s -X PUT "${H[@]}" -d "$1" $A/v1/nodes/$U/states/provision; }
# wait_for STATE…: poll until the node is in one of the states (or failed).
wait_for() {
	local t0=$(date +%s)
	while [ $(($(date +%s) - t0)) -lt 280 ]; do
		ST=$(curl -s "${H[@]}" $A/v1/nodes/$U | field 'n["provision_state"], "|", n["last_error"]')
		for want in "$@"; do
			case "$ST" in "$want |"*) echo "  $ST ($(($(date +%s) - t0)) s)"; return 0 ;; esac
		done
		case "$ST" in *failed*) echo "  $ST"; return 1 ;; esac
		sleep 1
	done
	echo "  timeout in $ST"
	return 1
}
# boot ARGS…: the "machine" — fake power boots nothing, so start QEMU with
# the kernel command line a boot interface would give. -cpu max gives TCG a
# RDRAND; without it the kernel's RNG takes minutes to initialise and DHCP
# (crypto/rand transaction IDs) waits for it.
boot() {
	timeout 300 qemu-system-x86_64 -machine q35 -cpu max -m 1024 -smp 2 -nographic -no-reboot \
		-kernel kernel/vmlinuz -initrd initramfs.zst \
		-append "console=ttyS0 quiet ipa-api-url=http://10.0.2.2:$KP BOOTIF=01-${MAC//:/-} ipa-advertise-host=127.0.0.1 ipa-advertise-port=$HF $*" \
		-netdev user,id=n0,hostfwd=tcp:127.0.0.1:$HF-:9999 -device virtio-net-pci,netdev=n0,mac=$MAC \
		-drive file=disk.raw,format=raw,if=virtio >>console.log 2>&1 &
	QP=$!
}
halt() {
	kill $QP 2>/dev/null || true
	wait $QP 2>/dev/null || true
}
START=$(date +%s)
: >console.log

echo "inspection:"
provision '{"target":"manage"}'
wait_for manageable
provision '{"target":"inspect"}'
wait_for "inspect wait"
boot ipa-inspection-callback-url=http://10.0.2.2:$KP/v1/continue_inspection
wait_for manageable
halt
curl -s "${H[@]}" $A/v1/nodes/$U/inventory | field '"  inventory disks:", [(d["name"], d["size"]) for d in n["inventory"]["disks"]], "nics:", [(i["name"], i["mac_address"]) for i in n["inventory"]["interfaces"]]'
curl -s "${H[@]}" $A/v1/nodes/$U | field '"  properties:", n["properties"]'

echo "automated cleaning:"
dd if=image.raw of=disk.raw bs=1M conv=notrunc status=none
provision '{"target":"provide"}'
wait_for "clean wait"
boot
wait_for available
halt
echo "  signatures left on the disk: '$(wipefs -n -O TYPE --noheadings disk.raw | tr '\n' ' ')'"

echo "deploy:"
curl -s -X PATCH "${H[@]}" -d "[{\"op\":\"add\",\"path\":\"/instance_info\",\"value\":{\"image_source\":\"http://10.0.2.2:$IP/image.raw\",\"image_os_hash_algo\":\"sha256\",\"image_os_hash_value\":\"$SUM\",\"root_device\":{\"name\":\"/dev/vda\"}}}]" $A/v1/nodes/$U >/dev/null
provision '{"target":"active","configdrive":{"meta_data":{"hostname":"qemu"}}}'
wait_for "wait call-back"
boot
wait_for active
halt
echo "node: $ST, $(($(date +%s) - START)) s for the three boots"
curl -s "${H[@]}" $A/v1/nodes/$U | field '"partition uuids:", n["driver_internal_info"].get("kiln_partition_uuids")'
n=$((49152 - 34 - 33))
echo "image bytes past the GPT on the disk: $(dd if=disk.raw bs=512 skip=34 count=$n status=none | sha256sum | cut -c1-16), in the image: $(dd if=image.raw bs=512 skip=34 count=$n status=none | sha256sum | cut -c1-16)"
sgdisk -p disk.raw | tail -4
echo "console: $work/console.log, controller: $work/kiln.log"
case "$ST" in active*) exit 0 ;; *) exit 1 ;; esac
