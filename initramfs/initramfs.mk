# initramfs.mk — the agent's kernel and initramfs. Included by the top-level
# Makefile; paths are relative to the repo root.
#
#   make kernel      out/kiln-agent.kernel (+ out/kernel/: modules, pci.ids)
#   make initramfs   out/kiln-agent.initramfs (zstd cpio) with $(AGENT_PKG)
#                    as the program u-root's init starts
#   make initramfs-testinit   the same with the boot-test stand-in init
#
# The initramfs is rebuilt only when its inputs changed: initramfs/inputs.sh
# hashes them (the agent's sources in this module, go.mod/go.sum, the u-root
# tools module, build.sh, the kernel and modules) and the hash of the last
# build is kept beside the image in out/kiln-agent.initramfs.inputs.
#
# The kernel .deb is cached in $(KILN_CACHE) (default $XDG_CACHE_HOME/kiln).

AGENT_PKG ?= ./agent/cmd/kiln-agent
TESTINIT_PKG ?= ./initramfs/testinit
KERNEL_OUT ?= out/kernel

.PHONY: kernel initramfs initramfs-testinit

kernel: out/kiln-agent.kernel ## the agent's kernel and modules (Debian's, pinned) into out/

$(KERNEL_OUT)/vmlinuz: scripts/fetch-kernel.sh initramfs/modules.txt
	scripts/fetch-kernel.sh $(KERNEL_OUT)

out/kiln-agent.kernel: $(KERNEL_OUT)/vmlinuz
	cp $< $@

# initramfs_build OUTPUT PKG: build.sh, unless OUTPUT exists and OUTPUT.inputs
# holds the hash of the current inputs. The hash is taken before the build,
# so a source changed during the build makes the next run build again.
define initramfs_build
	@h=$$(initramfs/inputs.sh $(2) $(KERNEL_OUT)) && \
	if [ -f $(1) ] && [ "$$(cat $(1).inputs 2>/dev/null)" = "$$h" ]; then \
	  echo "$(1): up to date (inputs unchanged; rm $(1).inputs to force a rebuild)"; \
	else \
	  rm -f $(1).inputs && initramfs/build.sh $(KERNEL_OUT) $(2) $(1) && echo "$$h" >$(1).inputs; \
	fi
endef

initramfs: kernel ## the agent's initramfs (u-root + kiln-agent), rebuilt only when its inputs changed
	$(call initramfs_build,out/kiln-agent.initramfs,$(AGENT_PKG))
	@ls -l out/kiln-agent.kernel out/kiln-agent.initramfs

initramfs-testinit: kernel ## the initramfs with the boot tests' stand-in init
	$(call initramfs_build,out/test/testinit.initramfs,$(TESTINIT_PKG))
