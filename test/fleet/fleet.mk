# fleet.mk — the simulated-fleet benchmark (test/fleet). Included by the
# top-level Makefile; paths are relative to the repo root.
#
#   make bench-fleet N=1000                    one controller on SQLite
#   make bench-fleet N=300 DB=postgres         three controllers on PostgreSQL, one killed -9 mid-deploy
#   make bench-fleet N=300 DB=postgres KILL=   the same without the kill
#
# FLEET_ARGS passes more flags to kiln-fleet-bench (-heartbeat, -clients,
# -phase-timeout, -dir, -kiln-args; see its -help).

N ?= 1000
DB ?= sqlite
KILL ?= $(if $(filter postgres,$(DB)),1,)
FLEET_ARGS ?=

.PHONY: bench-fleet

bench-fleet: ## N simulated machines enroll → active through kiln serve (N=1000, DB=sqlite|postgres, KILL=1 kills one of three): time per phase, heartbeat→command p50/p99, peak RSS, database size
	$(GO) run ./test/fleet/cmd/kiln-fleet-bench -n $(N) -db $(DB) $(if $(KILL),-kill) $(FLEET_ARGS)
