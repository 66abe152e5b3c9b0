# netboot.mk — QEMU machines network-booting from kiln serve's own DHCP and
# TFTP (test/netboot, build tag e2e): SeaBIOS + iPXE ROM and OVMF's native
# PXE on a bridge in a network namespace, no QEMU user networking; proxy
# mode beside dnsmasq; an unknown machine booted into the agent from out/
# (make initramfs, a prerequisite of e2e). Included by the top-level
# Makefile (its */*/*.mk glob) and run by make e2e.

.PHONY: e2e-netboot

e2e-netboot: initramfs ## QEMU BIOS and UEFI machines DHCP/TFTP-boot from kiln serve --dhcp (test/netboot, ~5 min)
	$(GO) test -tags e2e -count=1 -v -timeout 15m ./test/netboot/

e2e: e2e-netboot
