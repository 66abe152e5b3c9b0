#!/usr/bin/env bash
# Measures the controller's read throughput the way operators' tools load it:
# GET /v1/nodes?limit=100 and GET /v1/nodes/{uuid} at concurrency 16 with 1,000
# nodes enrolled, using wrk; prints requests/s, latency and the controller's RSS.
# Usage: scripts/bench-api.sh [nodes] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000}
SECS=${2:-10}
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)"; exit 1; }
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/kiln" ./controller/cmd/kiln
port=$((20000 + RANDOM % 20000))
"$work/kiln" serve --listen 127.0.0.1:$port --db "$work/kiln.db" --log-level warn &
pid=$!
url=http://127.0.0.1:$port
for _ in $(seq 100); do curl -fs "$url/v1/" >/dev/null && break; sleep 0.1; done
echo "enrolling $NODES nodes…"
seq "$NODES" | xargs -P 8 -I{} curl -fs -o /dev/null -H 'Content-Type: application/json' \
  -H 'X-OpenStack-Ironic-API-Version: 1.95' \
  -d '{"driver":"fake-hardware","name":"bench-{}","driver_info":{"ipmi_password":"x"},"properties":{"cpus":8}}' "$url/v1/nodes"
uuid=$(curl -fs -H 'X-OpenStack-Ironic-API-Version: 1.95' "$url/v1/nodes?limit=1" | sed 's/.*"uuid":"\([^"]*\)".*/\1/')
echo "RSS after enrolment: $(grep VmRSS /proc/$pid/status | awk '{print $2/1024 " MiB"}')"
hdr='X-OpenStack-Ironic-API-Version: 1.95'
echo "== GET /v1/nodes?limit=100 (c=16, ${SECS}s)"
wrk -t2 -c16 -d"${SECS}s" --latency -H "$hdr" "$url/v1/nodes?limit=100" | grep -E 'Requests/sec|Latency|50%|99%'
echo "== GET /v1/nodes/{uuid} (c=16, ${SECS}s)"
wrk -t2 -c16 -d"${SECS}s" --latency -H "$hdr" "$url/v1/nodes/$uuid" | grep -E 'Requests/sec|Latency|50%|99%'
echo "controller RSS: $(grep VmRSS /proc/$pid/status | awk '{print $2/1024 " MiB"}'), peak $(grep VmHWM /proc/$pid/status | awk '{print $2/1024 " MiB"}')"
