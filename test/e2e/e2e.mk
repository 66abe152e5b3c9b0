# e2e.mk — Kiln provisioning QEMU machines for real. Included by the top-level
# Makefile (its */*/*.mk glob); paths are relative to the repo root.
#
#   make e2e    builds the agent kernel + initramfs (make initramfs, skipped
#               when its inputs are unchanged), then runs test/e2e (build tag
#               e2e): kiln serve + bmcsim QEMU machines, twelve scenarios (BIOS,
#               UEFI, virtual media, static network x2, TLS, a checksum
#               failure, a controller crash, a software RAID-1 root, BIOS and UEFI provisioned
#               through kiln serve --dhcp full alone on a bridge in a network
#               namespace, and UEFI through --dhcp proxy beside dnsmasq);
#               4-10 min quiet before the DHCP scenarios, which took 4-15 min
#               each at load 30-60; with test/netboot (e2e-netboot) and the
#               builds, 1,017 s in CI on a quiet 2-core machine (2026-12-01).
#               E2E_RUN selects scenarios (go test -run), e.g. E2E_RUN=TestBIOS.
#               E2E_PARALLEL scenarios run at once (go test -parallel;
#               default 1, one by one): the scenarios are parallel-safe, but
#               TCG guests on 2 shared cores starve each other (see
#               test/e2e/README.md); E2E_PARALLEL=2 on a host with cores to spare.
#   make demo   scripts/demo.sh: one machine deployed end to end, left running.

E2E_RUN ?= .
E2E_TIMEOUT ?= 45m
E2E_PARALLEL ?= 1

.PHONY: e2e demo

e2e: initramfs ## Kiln provisioning QEMU machines end to end (test/e2e, 12 scenarios, 4-10 min)
	$(GO) test -tags e2e -count=1 -v -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -run '$(E2E_RUN)' ./test/e2e/

demo: initramfs ## kiln serve + one QEMU machine deployed end to end, left running (scripts/demo.sh)
	scripts/demo.sh
