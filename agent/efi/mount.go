package efi

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mount mounts efivarfs on DefaultVarsDir when the machine booted UEFI
// (sysRoot/firmware/efi exists, sysRoot "" = /sys) and nothing is mounted
// there yet. The ramdisk's init tries at boot, before the agent loads the
// efivarfs module, so the agent mounts it once its modules are in:
// install_bootloader writes the boot entries there. It reports whether it
// mounted; a BIOS machine or an efivarfs already there is not an error.
func Mount(sysRoot string) (bool, error) {
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	dir := filepath.Join(sysRoot, "firmware/efi/efivars")
	return mount(sysRoot, dir, isEfivarfs, func(dir string) error {
		return unix.Mount("efivarfs", dir, "efivarfs", 0, "")
	})
}

func mount(sysRoot, dir string, mounted func(string) bool, do func(string) error) (bool, error) {
	if _, err := os.Stat(filepath.Join(sysRoot, "firmware/efi")); err != nil {
		return false, nil // booted BIOS: no variables
	}
	if mounted(dir) {
		return false, nil
	}
	if err := do(dir); err != nil {
		return false, fmt.Errorf("mount efivarfs on %s: %w", dir, err)
	}
	return true, nil
}
