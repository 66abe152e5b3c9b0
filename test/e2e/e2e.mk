# e2e.mk — Kiln provisioning QEMU machines for real. Included by the top-level
# Makefile (its */*/*.mk glob); paths are relative to the repo root.
#
#   make e2e    builds the agent kernel + initramfs (make initramfs), then runs
#               test/e2e (build tag e2e): kiln serve + bmcsim QEMU machines,
#               BIOS and UEFI deploys, a checksum failure, a controller crash.
#               E2E_RUN selects scenarios (go test -run), e.g. E2E_RUN=TestBIOS.
#   make demo   scripts/demo.sh: one machine deployed end to end, left running.

E2E_RUN ?= .
E2E_TIMEOUT ?= 20m

.PHONY: e2e demo

e2e: initramfs ## Kiln provisioning QEMU machines end to end (test/e2e, ~6 min)
	$(GO) test -tags e2e -count=1 -v -timeout $(E2E_TIMEOUT) -run '$(E2E_RUN)' ./test/e2e/

demo: initramfs ## kiln serve + one QEMU machine deployed end to end, left running (scripts/demo.sh)
	scripts/demo.sh
