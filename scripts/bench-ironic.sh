#!/usr/bin/env bash
# Measures Kiln side by side with OpenStack Ironic on this machine: starts
# an Ironic (Debian's ironic-api and ironic-conductor; noauth, SQLite,
# json-rpc, fake-hardware, its own configuration directory, no system
# service), then runs scripts/bench-api.sh with it as the second endpoint:
# the same node set is enrolled on both, and -rounds alternates the two
# route by route, so that on a shared machine both see the same
# neighbours. Ironic's CPU is that of both its services (their common
# parent is SECOND_PID).
#
# Usage: scripts/bench-ironic.sh [nodes] [seconds per route and round] [rounds]
# Needs: apt-get install --no-install-recommends ironic-api ironic-conductor
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000}
SECS=${2:-5}
ROUNDS=${3:-3}
for tool in ironic-api ironic-conductor ironic-dbsync; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install ironic-api ironic-conductor)" >&2; exit 1; }
done
dir=$(mktemp -d)
group=
cleanup() {
  if [ -n "$group" ]; then
    kill -TERM -- "-$group" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir"/{state,tmp,http,tftp,tftp_master,images,master_images,lock}
port=$((20000 + RANDOM % 20000))
rpc=$((port + 1))
url=http://127.0.0.1:$port
# fake-hardware as Kiln's: fake power, boot and management; the direct
# deploy interface for the heartbeat route's nodes (apibench deploys them
# to wait call-back), fake for the rest. No power sync, as bench-api.sh
# runs kiln with --power-sync-interval 0.
cat >"$dir/ironic.conf" <<EOF
[DEFAULT]
auth_strategy = noauth
rpc_transport = json-rpc
host = 127.0.0.1
log_file = $dir/ironic.log
use_stderr = false
enabled_hardware_types = fake-hardware
enabled_boot_interfaces = fake
enabled_deploy_interfaces = fake,direct
enabled_power_interfaces = fake
enabled_management_interfaces = fake
enabled_inspect_interfaces = no-inspect,fake
enabled_network_interfaces = noop
enabled_console_interfaces = no-console,fake
enabled_raid_interfaces = no-raid,fake
enabled_rescue_interfaces = no-rescue,fake
enabled_vendor_interfaces = no-vendor,fake
enabled_bios_interfaces = no-bios,fake
state_path = $dir/state
tempdir = $dir/tmp
[api]
host_ip = 127.0.0.1
port = $port
api_workers = ${IRONIC_API_WORKERS:-1}
[database]
connection = sqlite:///$dir/ironic.db
[json_rpc]
auth_strategy = noauth
host_ip = 127.0.0.1
port = $rpc
[conductor]
automated_clean = false
sync_power_state_interval = -1
[deploy]
http_url = http://127.0.0.1:1/
http_root = $dir/http
fast_track = false
[dhcp]
dhcp_provider = none
[pxe]
tftp_root = $dir/tftp
tftp_master_path = $dir/tftp_master
images_path = $dir/images
instance_master_path = $dir/master_images
[service_catalog]
endpoint_override = $url
[oslo_concurrency]
lock_path = $dir/lock
EOF
ironic-dbsync --config-file "$dir/ironic.conf" create_schema >"$dir/dbsync.out" 2>&1 ||
  { cat "$dir/dbsync.out" >&2; exit 1; }
# One parent for both services, in its own process group: its pid counts
# their CPU (apibench adds descendants), and the group ends with the script.
setsid bash -c "ironic-conductor --config-file '$dir/ironic.conf' & ironic-api --config-file '$dir/ironic.conf' & wait" \
  >"$dir/services.out" 2>&1 &
group=$!
for _ in $(seq 600); do
  if curl -fs "$url/v1/" >/dev/null && curl -fs -H 'X-OpenStack-Ironic-API-Version: 1.82' "$url/v1/drivers" | grep -q fake-hardware; then
    break
  fi
  sleep 0.2
done
curl -fs -H 'X-OpenStack-Ironic-API-Version: 1.82' "$url/v1/drivers" | grep -q fake-hardware ||
  { echo "Ironic did not start:" >&2; tail -20 "$dir/ironic.log" "$dir/services.out" >&2; exit 1; }
echo "second endpoint: Ironic $(dpkg-query -W -f='${Version}' ironic-api 2>/dev/null || echo '?') at $url (api_workers ${IRONIC_API_WORKERS:-1}), CPU of pid $group and its descendants"
SECOND_URL=$url SECOND_PID=$group APIBENCH_ARGS="-rounds $ROUNDS ${APIBENCH_ARGS:-}" scripts/bench-api.sh "$NODES" "$SECS" ||
  { echo "Ironic's log:" >&2; grep -E ' (ERROR|WARNING) ' "$dir/ironic.log" | tail -20 >&2; exit 1; }
echo "ironic RSS (all processes): $(ps -eo pgid=,rss= | awk -v g="$group" '$1 == g {s += $2} END {print s/1024 " MiB"}')"
