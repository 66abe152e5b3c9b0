#!/bin/sh
# demo.sh — Kiln deploying a QEMU machine end to end, left running to explore.
#
# Starts `kiln serve` on SQLite and a Redfish BMC simulator with one QEMU
# machine (SeaBIOS + iPXE over QEMU user networking; UEFI with DEMO_UEFI=1),
# enrolls the machine with the redfish driver, then manage → provide → deploy
# a small test image with a config drive, printing progress, and waits for
# the deployed OS's marker on the serial console. Everything stays up until
# Ctrl-C. Needs `make initramfs` first (make demo does it).
#
# Environment (all optional): DEMO_DIR, the run's directory (default: a new
# kiln-demo.XXXXXX in $TMPDIR, so demos never share or wipe each other's
# state; an existing DEMO_DIR must be empty); KILN_PORT (default: the first
# free port from 6385), BMC_PORT (from 8000; the simulator's admin API uses
# BMC_PORT+99), AGENT_PORT (from 19999, forwarded to the agent's :9999);
# DEMO_UEFI (0). The directory and ports are printed at the start.
set -eu
PATH=$PATH:/usr/sbin:/sbin
export PATH

root=$(cd "$(dirname "$0")/.." && pwd)

# in_use PORT: whether something listens on 127.0.0.1:PORT or *:PORT.
in_use() { ss -Htln "( sport = :$1 )" 2>/dev/null | grep -q .; }
# free_port FIRST [OFFSET]: the first port from FIRST with PORT and
# PORT+OFFSET free and not already chosen in this run (it runs in a
# subshell, so the caller adds its choice to $chosen).
chosen=""
free_port() {
	p=$1
	while in_use "$p" || in_use $((p + ${2:-0})) || case " $chosen " in *" $p "*) true ;; *) false ;; esac; do
		p=$((p + 1))
	done
	echo "$p"
}
command -v ss >/dev/null || { echo "demo: ss not found (Debian iproute2; scripts/install-deps.sh)" >&2; exit 1; }
kport=${KILN_PORT:-$(free_port 6385)}
chosen="$chosen $kport"
bport=${BMC_PORT:-$(free_port 8000 99)}
chosen="$chosen $bport $((bport + 99))"
aport=${AGENT_PORT:-$(free_port 19999)}
uefi=${DEMO_UEFI:-0}
api=http://127.0.0.1:$kport
hdr='X-OpenStack-Ironic-API-Version: 1.95'

for f in out/kiln-agent.kernel out/kiln-agent.initramfs out/kernel/vmlinuz; do
	[ -f "$root/$f" ] || { echo "demo: $f missing: run make initramfs" >&2; exit 1; }
done
for t in qemu-system-x86_64 qemu-img curl; do
	command -v $t >/dev/null || { echo "demo: $t not found (scripts/install-deps.sh)" >&2; exit 1; }
done

if [ -n "${DEMO_DIR:-}" ]; then
	dir=$DEMO_DIR
	mkdir -p "$dir"
	[ -z "$(ls -A "$dir")" ] || { echo "demo: DEMO_DIR $dir is not empty: choose another (or remove it yourself)" >&2; exit 1; }
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-demo.XXXXXX")
fi
mkdir -p "$dir/bin" "$dir/boot" "$dir/vms"
say() { printf '\033[1m[%s] %s\033[0m\n' "$(date +%T)" "$*"; }
say "this run: directory $dir; ports: kiln $kport, BMC $bport (admin $((bport + 99))), agent $aport"

say "building kiln, kiln-bmcsim and the test image (mkimage.sh)"
(cd "$root" && CGO_ENABLED=0 go build -o "$dir/bin/kiln" ./controller/cmd/kiln &&
	go build -o "$dir/bin/kiln-bmcsim" ./test/bmcsim/cmd/kiln-bmcsim)
"$root/test/e2e/mkimage.sh" "$root/out/kernel" "$dir/images" demo
cp "$root/out/kiln-agent.kernel" "$root/out/kiln-agent.initramfs" "$dir/images/demo.qcow2" "$dir/boot/"
sum=$(cat "$dir/images/demo.qcow2.sha256")

pids=""
cleanup() {
	say "stopping"
	for p in $pids; do kill "$p" 2>/dev/null || :; done
	wait 2>/dev/null || :
}
trap cleanup EXIT
# Ctrl-C is how the demo is meant to end: stop everything and exit 0, so
# that make does not report an error.
trap 'exit 0' INT TERM

say "kiln serve on $api (database $dir/kiln.db, log $dir/kiln.log)"
"$dir/bin/kiln" serve --listen "127.0.0.1:$kport" --db "$dir/kiln.db" \
	--api-url "http://10.0.2.2:$kport" --boot-dir "$dir/boot" --power-sync-interval 30s \
	>"$dir/kiln.log" 2>&1 &
pids="$pids $!"

uflag=""
[ "$uefi" = 1 ] && uflag=-uefi
say "bmcsim: one QEMU machine behind http://127.0.0.1:$bport (log $dir/bmcsim.log, serial $dir/vms/vm0/serial.log)"
"$dir/bin/kiln-bmcsim" -backend qemu -n 1 -qemu-dir "$dir/vms" -disk-size $((4 << 30)) \
	-bootfile "http://10.0.2.2:$kport/boot/boot.ipxe" -base-port "$bport" -agent-fwd-base "$aport" \
	-admin 127.0.0.1:$((bport + 99)) $uflag >"$dir/bmcsim.json" 2>"$dir/bmcsim.log" &
pids="$pids $!"

for i in $(seq 100); do
	curl -sf "$api/v1/" >/dev/null && [ -s "$dir/bmcsim.json" ] && break
	sleep 0.2
done
bmc=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$dir/bmcsim.json" | head -1)
sys=/redfish/v1/Systems/$(sed -n 's/.*"systems":\["\([^"]*\)".*/\1/p' "$dir/bmcsim.json" | head -1)
mac=$(curl -s -u admin:password "$bmc$sys/EthernetInterfaces/NIC1" | sed -n 's/.*"MACAddress": *"\([^"]*\)".*/\1/p')
[ -n "$bmc" ] && [ -n "$mac" ] || { echo "demo: bmcsim did not start: $(cat "$dir/bmcsim.log")" >&2; exit 1; }

call() { # METHOD PATH [BODY]
	if [ $# -eq 3 ]; then
		curl -sS -X "$1" -H "$hdr" -H 'Content-Type: application/json' -d "$3" "$api$2"
	else
		curl -sS -X "$1" -H "$hdr" "$api$2"
	fi
}
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\)\"\{0,1\}.*/\1/p" | head -1; }

say "enrolling the machine (redfish, ipxe boot, direct deploy), MAC $mac"
node=$(call POST /v1/nodes "{\"name\":\"demo\",\"driver\":\"redfish\",\"boot_interface\":\"ipxe\",
 \"deploy_interface\":\"direct\",\"inspect_interface\":\"agent\",\"automated_clean\":false,
 \"driver_info\":{\"redfish_address\":\"$bmc\",\"redfish_system_id\":\"$sys\",\"redfish_username\":\"admin\",
 \"redfish_password\":\"password\",\"kernel_append_params\":\"ipa-advertise-host=127.0.0.1 ipa-advertise-port=$aport\"}}" | field uuid)
call POST /v1/ports "{\"node_uuid\":\"$node\",\"address\":\"$mac\",\"pxe_enabled\":true}" >/dev/null
echo "node $node"

# running_step: the name of the clean or deploy step in the node document on
# stdin, if one runs. The step object's "args" come first and may hold
# braces, so the name is the first "step" key after "clean_step": { or
# "deploy_step": { (an empty object means no step).
running_step() {
	sed -n 's/.*"\(clean\|deploy\)_step": *{ *\("[^}].*\)/\2/p' | grep -o '"step": *"[^"]*"' | head -1 | sed 's/.*"\([^"]*\)"$/\1/'
}

# wait_state STATE: print transitions until the node is in STATE (stable).
wait_state() {
	last=""
	while :; do
		doc=$(call GET "/v1/nodes/$node")
		st=$(echo "$doc" | field provision_state)
		tgt=$(echo "$doc" | field target_provision_state)
		pw=$(echo "$doc" | field power_state)
		step=$(echo "$doc" | running_step)
		line="$st (power $pw${step:+, step $step})"
		[ "$line" != "$last" ] && say "  $line" && last=$line
		[ "$st" = "$1" ] && [ "$tgt" = null ] && return 0
		case $st in *failed) echo "$doc" | field last_error; return 1 ;; esac
		sleep 1
	done
}

say "manage";  call PUT "/v1/nodes/$node/states/provision" '{"target":"manage"}';  wait_state manageable
say "provide"; call PUT "/v1/nodes/$node/states/provision" '{"target":"provide"}'; wait_state available
call PATCH "/v1/nodes/$node" "[{\"op\":\"add\",\"path\":\"/instance_info/image_source\",\"value\":\"http://10.0.2.2:$kport/boot/files/demo.qcow2\"},
 {\"op\":\"add\",\"path\":\"/instance_info/image_disk_format\",\"value\":\"qcow2\"},
 {\"op\":\"add\",\"path\":\"/instance_info/image_os_hash_algo\",\"value\":\"sha256\"},
 {\"op\":\"add\",\"path\":\"/instance_info/image_os_hash_value\",\"value\":\"$sum\"}]" >/dev/null
say "deploy (the machine PXE-boots the agent, which writes the image; watch: tail -f $dir/vms/vm0/serial.log)"
start=$(date +%s)
call PUT "/v1/nodes/$node/states/provision" "{\"target\":\"active\",\"configdrive\":{\"meta_data\":{\"uuid\":\"$node\",\"hostname\":\"demo\"}}}"
wait_state active
say "active after $(( $(date +%s) - start ))s; waiting for the deployed OS on the serial console"
for i in $(seq 240); do
	m=$(grep -a KILN-E2E-DEPLOYED-OS "$dir/vms/vm0/serial.log" | tail -1 || :)
	[ -n "$m" ] && break
	sleep 1
done
say "deployed OS says: ${m:-nothing yet (see the serial log)}"

cat <<EOF

Everything is still running. Try:
  curl -s -H '$hdr' $api/v1/nodes/$node | python3 -m json.tool
  curl -s -H '$hdr' $api/v1/nodes/$node/history
  curl -s -u admin:password $bmc$sys | python3 -m json.tool          # the BMC
  OS_ENDPOINT=$api OS_AUTH_TYPE=none openstack baremetal node show demo
  OS_ENDPOINT=$api OS_AUTH_TYPE=none openstack baremetal node undeploy demo   # clean + available
  tail -f $dir/vms/vm0/serial.log $dir/kiln.log
Ctrl-C stops kiln, the BMC simulator and the VM.
EOF
wait
