// Package initramfs is the recipe for kiln-agent's boot image: the kernel
// module list (modules.txt), the u-root image build (build.sh,
// initramfs.mk, the tools module in tools/), the module loader the agent
// calls at start (modload) and a stand-in init for boot tests (testinit).
//
// Its test builds the kernel and initramfs with testinit and boots them in
// QEMU, directly and through iPXE network boot served by controller/boot.
package initramfs
