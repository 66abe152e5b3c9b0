# initramfs.mk — the agent's kernel and initramfs. Included by the top-level
# Makefile; paths are relative to the repo root.
#
#   make kernel      out/kiln-agent.kernel (+ out/kernel/: modules, pci.ids)
#   make initramfs   out/kiln-agent.initramfs (zstd cpio) with $(AGENT_PKG)
#                    as the program u-root's init starts
#   make initramfs-testinit   the same with the boot-test stand-in init
#
# The kernel .deb is cached in $(KILN_CACHE) (default $XDG_CACHE_HOME/kiln).

AGENT_PKG ?= ./agent/cmd/kiln-agent
TESTINIT_PKG ?= ./initramfs/testinit
KERNEL_OUT ?= out/kernel

.PHONY: kernel initramfs initramfs-testinit

kernel: out/kiln-agent.kernel

$(KERNEL_OUT)/vmlinuz: scripts/fetch-kernel.sh initramfs/modules.txt
	scripts/fetch-kernel.sh $(KERNEL_OUT)

out/kiln-agent.kernel: $(KERNEL_OUT)/vmlinuz
	cp $< $@

# Always rebuilt: the program's sources are anywhere in the module.
initramfs: kernel
	initramfs/build.sh $(KERNEL_OUT) $(AGENT_PKG) out/kiln-agent.initramfs
	@ls -l out/kiln-agent.kernel out/kiln-agent.initramfs

initramfs-testinit: kernel
	initramfs/build.sh $(KERNEL_OUT) $(TESTINIT_PKG) out/test/testinit.initramfs
