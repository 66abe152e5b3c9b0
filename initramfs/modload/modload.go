// Package modload loads the kernel modules shipped in the agent's initramfs,
// in the order scripts/fetch-kernel.sh computed.
//
// Debian's kernel builds virtio, NVMe, AHCI and NIC drivers as modules, so the
// initramfs carries them in Dir with a file "order" that lists each module
// after the modules it depends on. u-root's init loads /lib/modules/*.ko
// alphabetically without resolving dependencies, so they live elsewhere and
// the initramfs's program (kiln-agent, or the boot-test init) calls Load
// first thing at start.
package modload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where the initramfs build puts the modules and their "order" file.
const Dir = "/lib/kiln/modules"

// InsertFunc inserts one module into the running kernel.
type InsertFunc func(f *os.File) error

// FinitModule inserts a module with finit_module(2). A module that is already
// loaded (or built in) is not an error.
func FinitModule(f *os.File) error {
	err := unix.FinitModule(int(f.Fd()), "", 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

// ReadOrder parses an order file: one module file name per line; blank lines
// and lines starting with # are ignored. Names must be plain file names.
func ReadOrder(r io.Reader) ([]string, error) {
	var names []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line != filepath.Base(line) || line == "." || line == ".." {
			return nil, fmt.Errorf("module order line %d: %q is not a file name", n, line)
		}
		names = append(names, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read module order: %w", err)
	}
	return names, nil
}

// Load inserts every module listed in dir/order, in that order, with insert
// (FinitModule when nil). A module that fails to load (say a CPU-specific
// crypto module on a CPU without the feature) does not stop the others: Load
// logs it and returns all failures joined, after trying every module. It
// returns the names of the modules that loaded.
//
// A module whose init answers ENODEV is not a failure: that is how a module
// says the machine has nothing for it (efivarfs on a machine booted by BIOS,
// a driver without its hardware), so Load logs it as absent and goes on.
//
// When dir also holds the build's "deps" and "aliases" tables, Load inserts
// only the modules Select picks for this machine's PCI devices and logs the
// others, in one line, as skipped.
func Load(ctx context.Context, log *slog.Logger, dir string, insert InsertFunc) ([]string, error) {
	if insert == nil {
		insert = FinitModule
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	of, err := os.Open(filepath.Join(dir, "order"))
	if err != nil {
		return nil, fmt.Errorf("open module order: %w", err)
	}
	names, err := ReadOrder(of)
	of.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	names, skipped := selectFor(log, dir, names)
	var loaded []string
	var errs []error
	absent := 0
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return loaded, errors.Join(append(errs, err)...)
		}
		err := insertFile(filepath.Join(dir, name), insert)
		if errors.Is(err, unix.ENODEV) {
			log.Info("kernel module has nothing to drive here", "module", name)
			absent++
			continue
		}
		if err != nil {
			log.Warn("load kernel module", "module", name, "err", err)
			errs = append(errs, fmt.Errorf("load module %s: %w", name, err))
			continue
		}
		loaded = append(loaded, name)
	}
	log.Info("kernel modules loaded", "loaded", len(loaded), "absent", absent, "failed", len(errs), "skipped", len(skipped))
	return loaded, errors.Join(errs...)
}

func insertFile(path string, insert InsertFunc) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return insert(f)
}

// pciDevices is where Load reads the machine's PCI devices (tests change it).
var pciDevices = "/sys/bus/pci/devices"

// selectFor narrows names to what Select picks when dir has the deps and
// aliases tables; without them, or when they cannot be read, it keeps every
// module (an initramfs built before the tables existed loads as it did).
func selectFor(log *slog.Logger, dir string, names []string) (load, skip []string) {
	df, err := os.Open(filepath.Join(dir, "deps"))
	if err != nil {
		return names, nil
	}
	deps, err := ReadDeps(df)
	df.Close()
	if err != nil {
		log.Warn("module tables unreadable; loading every module", "err", err)
		return names, nil
	}
	af, err := os.Open(filepath.Join(dir, "aliases"))
	if err != nil {
		log.Warn("module aliases missing; loading every module", "err", err)
		return names, nil
	}
	aliases, err := ReadAliases(af)
	af.Close()
	if err != nil {
		log.Warn("module tables unreadable; loading every module", "err", err)
		return names, nil
	}
	pci, err := PCIModaliases(pciDevices)
	if err != nil || len(pci) == 0 {
		log.Warn("no PCI devices listed; loading every module", "dir", pciDevices, "err", err)
		return names, nil
	}
	load, skip = Select(names, deps, aliases, pci)
	if len(skip) > 0 {
		log.Info("kernel modules skipped: no matching device", "count", len(skip), "modules", strings.Join(skip, " "))
	}
	return load, skip
}
