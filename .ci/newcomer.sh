#!/usr/bin/env bash
# newcomer.sh — the README followed literally by a normal user, in a clean
# clone: the run command (`go run ./controller/cmd/kiln serve`) started in
# the background and checked with curl /v1/, then stopped; then the test
# command (`make test`). Run by .ci/run as root after scripts/install-deps.sh
# (the README's first command, which needs root); see .ci/run for why the
# whole suite runs again here.
#
# The user is new on every run (kiln-nc-<time>-<pid>, removed with its home
# at the end, except under CI=true: a CI machine is thrown away, and deleting
# that home's Go caches took 4 minutes on a loaded machine) and the controller
# listens on a port free at start, both printed: a second run on the
# machine, or one beside a developer's kiln on 6385, neither reuses nor
# disturbs anything.
#
# Environment: NEWCOMER (an existing or new user name to use instead; it is
# kept), NEWCOMER_TEST (0 skips `make test`, for a quick local check of the
# rest).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "newcomer: run as root: it creates the user" >&2; exit 1; }

user=${NEWCOMER:-kiln-nc-$(date +%s)-$$}
serve="" # the background run command's pid, while it runs
remove="" # set when this run made the user and removes it
stop_serve() { kill -TERM -- "-$serve" 2>/dev/null || :; wait "$serve" 2>/dev/null || :; serve=""; }
finish() {
	[ -z "$serve" ] || stop_serve
	# The user's processes are gone by then: serve stopped, make test waited for.
	[ -z "$remove" ] || userdel --remove "$user" 2>/dev/null || echo "newcomer: could not remove user $user" >&2
}
trap finish EXIT
if ! id "$user" >/dev/null 2>&1; then
	useradd --create-home --shell /bin/bash "$user"
	[ -n "${NEWCOMER:-}" ] || [ "${CI:-}" = true ] || remove=1
fi
echo "newcomer: user $user"
home=$(getent passwd "$user" | cut -d: -f6)
clone=$home/kiln
rm -rf "$clone"
# A clean clone of what is committed here, owned by the user.
git clone --quiet --no-hardlinks "$PWD" "$clone"
chown -R "$user:" "$clone"

# A normal user's environment: Debian's default PATH (no /usr/sbin, /sbin)
# plus the directory of the Go the README asks for; its own HOME and Go
# caches. Nothing of root's leaks in.
gobin=$(dirname "$(command -v go)")
as_user() {
	runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" SHELL=/bin/bash \
		LANG=C.UTF-8 PATH="$gobin:/usr/local/bin:/usr/bin:/bin" \
		bash -c "cd '$clone' && $1"
}
as_user 'id; echo "PATH=$PATH"; go version'

# The run command, in the background, in its own session so that stopping
# it stops go run and the kiln it started. It gets --listen (a flag the
# README's flag table documents) on a port the kernel found free, so that a
# kiln already on the default 6385 is neither hit nor in the way.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "newcomer: kiln serve on 127.0.0.1:$port"
log=$(mktemp /tmp/kiln-newcomer-serve.XXXXXX)
chmod 666 "$log"
setsid runuser -u "$user" -- env -i HOME="$home" USER="$user" LANG=C.UTF-8 \
	PATH="$gobin:/usr/local/bin:/usr/bin:/bin" \
	bash -c "cd '$clone' && exec go run ./controller/cmd/kiln serve --listen 127.0.0.1:$port" >"$log" 2>&1 &
serve=$!
# go run compiles first: on a cold cache and a loaded 2-core machine that
# took over 10 minutes (modernc.org/sqlite alone is minutes), so the limit
# is a generous safety net; a dead go run ends the wait at once.
ok=""
for _ in $(seq 1800); do
	kill -0 "$serve" 2>/dev/null || break
	if body=$(curl -sf "http://127.0.0.1:$port/v1/"); then ok=1; break; fi
	sleep 1
done
if [ -z "$ok" ]; then
	echo "newcomer: the README's run command did not answer /v1/ within 30 minutes:" >&2
	cat "$log" >&2
	exit 1
fi
echo "$body" | grep -q '"id": *"v1"' || { echo "newcomer: /v1/ answered unexpectedly: $body" >&2; exit 1; }
echo "newcomer: kiln serve answered /v1/ as $user"
stop_serve
# A quick-start run needs no boot files: a warning that ./out is missing
# would only alarm a newcomer. Other warnings are shown, not judged here.
if grep 'level=WARN' "$log" | grep -q 'boot files'; then
	echo "newcomer: kiln serve warned about boot files on a quick-start run:" >&2
	grep 'level=WARN' "$log" >&2
	exit 1
fi
grep 'level=WARN' "$log" | sed 's/^/newcomer: kiln serve warned: /' || :
rm -f "$log"

if [ "${NEWCOMER_TEST:-1}" != 0 ]; then
	as_user 'make test'
fi
echo "newcomer: the README's commands work for $user"
