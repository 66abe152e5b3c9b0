#!/usr/bin/env bash
# Measures what HTTP basic auth and TLS cost: GET /v1/nodes?limit=100 at
# concurrency 16 with 1,000 fake nodes, on one database, alternating a plain
# controller (no auth, HTTP) and a guarded one (--htpasswd with a cost-12
# bcrypt hash, --tls-cert), ROUNDS times each so that machine noise falls on
# both alike. Prints requests/s and the server's CPU-ms per request (from
# /proc/<pid>/stat: on a shared machine the steady figure) per run, and the
# medians of both.
# Usage: scripts/bench-trust.sh [nodes] [seconds] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000}
SECS=${2:-10}
ROUNDS=${3:-3}
for t in wrk openssl htpasswd curl; do
  command -v $t >/dev/null || { echo "$t not installed (apt-get install wrk openssl apache2-utils curl)"; exit 1; }
done
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/kiln" ./controller/cmd/kiln
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
htpasswd -cbB -C 12 "$work/htpasswd" bench bench-pw 2>/dev/null
auth="Authorization: Basic $(printf bench:bench-pw | base64)"
hdr='X-OpenStack-Ironic-API-Version: 1.95'
port=$((20000 + RANDOM % 20000))

start() { # plain|guarded
  local extra=()
  [ "$1" = guarded ] && extra=(--htpasswd "$work/htpasswd" --tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
  "$work/kiln" serve --listen 127.0.0.1:$port --db "$work/kiln.db" --log-level error --power-sync-interval 0 --boot-dir "$work" "${extra[@]}" &
  pid=$!
  scheme=http; [ "$1" = guarded ] && scheme=https
  url=$scheme://127.0.0.1:$port
  for _ in $(seq 300); do curl -kfs "$url/v1/" >/dev/null && return; sleep 0.1; done
  echo "kiln did not start"; exit 1
}
stop() { kill $pid; wait $pid 2>/dev/null || true; pid=; }

start plain
echo "enrolling $NODES nodes…"
seq "$NODES" | xargs -P 8 -I{} curl -fs -o /dev/null -H 'Content-Type: application/json' -H "$hdr" \
  -d '{"driver":"fake-hardware","name":"bench-{}","driver_info":{"ipmi_password":"x"},"properties":{"cpus":8}}' "$url/v1/nodes"
stop

# cputicks PID: user + system clock ticks the process has used.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A runs cpu
for r in $(seq "$ROUNDS"); do
  for mode in plain guarded; do
    start $mode
    args=(-H "$hdr")
    [ $mode = guarded ] && args+=(-H "$auth")
    [ "$(curl -ks -o /dev/null -w '%{http_code}' "${args[@]}" "$url/v1/nodes?limit=100")" = 200 ] || { echo "$mode: GET refused"; exit 1; }
    ticks0=$(cputicks $pid)
    out=$(wrk -t2 -c16 -d"${SECS}s" --latency "${args[@]}" "$url/v1/nodes?limit=100")
    ticks1=$(cputicks $pid)
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    cpums=$(awk -v t=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v n="$reqs" 'BEGIN {printf "%.3f", t*1000/hz/n}')
    if grep -q Non-2xx <<<"$out"; then echo "$mode: wrk got errors:"; echo "$out"; exit 1; fi
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    echo "round $r $mode: $rps req/s, $cpums CPU-ms/req, $(awk '/Transfer\/sec/ {print $2}' <<<"$out")/s, p50 $(awk '$1=="50%" {print $2}' <<<"$out"), p99 $(awk '$1=="99%" {print $2}' <<<"$out")"
    runs[$mode]+="$rps "
    cpu[$mode]+="$cpums "
    stop
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
p=$(echo "${runs[plain]}" | median); g=$(echo "${runs[guarded]}" | median)
echo "median plain $p req/s, auth+TLS $g req/s: cost $(awk -v p="$p" -v g="$g" 'BEGIN {printf "%.1f", (1-g/p)*100}') %"
pc=$(echo "${cpu[plain]}" | median); gc=$(echo "${cpu[guarded]}" | median)
echo "median CPU per request: plain $pc ms, auth+TLS $gc ms: cost $(awk -v p="$pc" -v g="$gc" 'BEGIN {printf "%.1f", (g/p-1)*100}') %"
