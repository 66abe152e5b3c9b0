#!/usr/bin/env bash
# Measures the controller's API the way operators' tools load it, route by
# route (node list, detail, get, port list and detail, heartbeat) at
# concurrency 16 with a fleet of fake-hardware nodes (a port each) enrolled
# through the API: requests/s and the server's CPU-ms per request, read from
# /proc/<pid>/stat (on a shared machine CPU per request is the steady figure;
# requests/s depend on the neighbours). The load generator is test/apibench.
#
# Usage: scripts/bench-api.sh [nodes] [seconds per route]
# A second endpoint, measured the same way with the same node set:
#   SECOND_URL=http://ironic:6385 SECOND_PID=<server or uwsgi master pid> scripts/bench-api.sh
#   BASELINE=main scripts/bench-api.sh      # a kiln built from that git revision
# Extra arguments for test/apibench (e.g. -version 1.95) go in APIBENCH_ARGS.
# Then, unless HB_WRITTEN=0, the written heartbeat: HB_AGENTS (default 1000)
# nodes in wait call-back whose agents heartbeat in turn, on controllers
# started afresh with a 50 ms heartbeat resolution (--agent-heartbeat-timeout
# 1s), so that every heartbeat is past it and recorded, as each periodic
# heartbeat of a real agent (every 20-30 s) is. It reports the database
# writes per heartbeat by kind (kiln_store_writes_total).
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000}
SECS=${2:-10}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

start_kiln() { # start_kiln BINARY NAME [FLAGS…] → sets url, pid
  local port=$((20000 + RANDOM % 20000)) bin=$1 name=$2
  shift 2
  "$bin" serve --listen 127.0.0.1:$port --db "$work/$name.db" --conductor "bench-$name" --log-level warn \
    --power-sync-interval 0 --agent-lookup-rate 0 "$@" &
  pid=$!
  pids+=("$pid")
  url=http://127.0.0.1:$port
  for _ in $(seq 200); do curl -fs "$url/v1/" >/dev/null && return; sleep 0.1; done
  echo "kiln ($name) did not start" >&2
  exit 1
}

CGO_ENABLED=0 go build -o "$work/kiln" ./controller/cmd/kiln
go build -o "$work/apibench" ./test/apibench
start_kiln "$work/kiln" current
args=(-url "$url" -pid "$pid")
kpid=$pid
if [ -n "${BASELINE:-}" ]; then
  mkdir "$work/baseline"
  git archive "$BASELINE" | tar -x -C "$work/baseline"
  (cd "$work/baseline" && CGO_ENABLED=0 go build -o "$work/kiln-baseline" ./controller/cmd/kiln)
  start_kiln "$work/kiln-baseline" baseline
  echo "second endpoint: kiln built from $BASELINE ($(git rev-parse --short "$BASELINE"))"
  args+=(-url2 "$url" -pid2 "$pid")
elif [ -n "${SECOND_URL:-}" ]; then
  args+=(-url2 "$SECOND_URL" -pid2 "${SECOND_PID:-0}")
fi
echo "first endpoint: kiln built from the work tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))"
# shellcheck disable=SC2086 # APIBENCH_ARGS is a list of flags
"$work/apibench" "${args[@]}" -enroll "$NODES" -d "${SECS}s" ${APIBENCH_ARGS:-}
echo "kiln RSS: $(awk '/VmRSS/{print $2/1024 " MiB"}' /proc/$kpid/status), peak $(awk '/VmHWM/{print $2/1024 " MiB"}' /proc/$kpid/status)"

if [ "${HB_WRITTEN:-1}" != 0 ]; then
  echo
  echo "written heartbeats: ${HB_AGENTS:-1000} agents, controllers with a 50 ms heartbeat resolution"
  start_kiln "$work/kiln" current-written --agent-heartbeat-timeout 1s
  wargs=(-url "$url" -pid "$pid")
  if [ -n "${BASELINE:-}" ]; then
    start_kiln "$work/kiln-baseline" baseline-written --agent-heartbeat-timeout 1s
    wargs+=(-url2 "$url" -pid2 "$pid")
  fi
  "$work/apibench" "${wargs[@]}" -enroll 0 -routes heartbeat-written -heartbeat-route heartbeat-written \
    -agents "${HB_AGENTS:-1000}" -d "${SECS}s" ${APIBENCH_ARGS:-}
fi
