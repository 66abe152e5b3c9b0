package modload

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Loading every module the initramfs carries costs seconds under emulation
// and work on any machine: the 40-odd NIC and storage drivers real servers
// need are mostly for hardware a given machine lacks (mlx5_core alone is
// 3.9 MB to checksum, relocate and initialise). So, as udev does, a device
// driver is loaded only when a device on the machine matches one of its
// aliases; modules that drive no bus device (file systems, md, the power
// button) are always loaded. The build writes the tables: "deps" (depmod's
// modules.dep in file names) and "aliases" (depmod's modules.alias on the
// pci, virtio, usb and scsi buses).

// busCore names, for each bus whose devices appear only once a driver below
// it loaded, the module that provides the bus. A driver for such a bus is
// loaded whenever its bus core is: its devices cannot be listed before
// userspace starts (a virtio NIC exists once virtio_pci bound its PCI
// function; a USB stick once the host controller enumerated its ports,
// possibly much later), so the driver must be there when they come.
var busCore = map[string]string{
	"virtio": "virtio.ko",
	"usb":    "usbcore.ko",
	"scsi":   "scsi_mod.ko",
}

// Alias is one device pattern a module drives, as in modules.alias
// ("pci:v00008086d000010D3sv*sd*bc*sc*i*"), with the module's file name.
type Alias struct {
	File, Pattern string
}

// ReadDeps parses a deps file: "FILE: DEP DEP…" per line, file names only.
func ReadDeps(r io.Reader) (map[string][]string, error) {
	deps := map[string][]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		file, rest, ok := strings.Cut(line, ":")
		if !ok || !plainName(file) {
			return nil, fmt.Errorf("module deps line %d: want \"FILE: DEP…\", got %q", n, line)
		}
		list := strings.Fields(rest)
		for _, d := range list {
			if !plainName(d) {
				return nil, fmt.Errorf("module deps line %d: %q is not a file name", n, d)
			}
		}
		deps[file] = list
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read module deps: %w", err)
	}
	return deps, nil
}

// ReadAliases parses an aliases file: "FILE PATTERN" per line.
func ReadAliases(r io.Reader) ([]Alias, error) {
	var out []Alias
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !plainName(f[0]) {
			return nil, fmt.Errorf("module aliases line %d: want \"FILE PATTERN\", got %q", n, line)
		}
		if _, err := path.Match(f[1], ""); err != nil {
			return nil, fmt.Errorf("module aliases line %d: pattern %q: %w", n, f[1], err)
		}
		out = append(out, Alias{File: f[0], Pattern: f[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read module aliases: %w", err)
	}
	return out, nil
}

func plainName(s string) bool {
	return s != "" && s == filepath.Base(s) && s != "." && s != ".."
}

// Select decides which of the modules in order to load on a machine whose
// PCI devices have the modaliases pci ("pci:v…d…sv…sd…bc…sc…i…", from
// /sys/bus/pci/devices/*/modalias). It returns the modules to load, in
// order, and those left out. A module is loaded when:
//   - it has PCI aliases and one matches a device;
//   - it has no PCI alias but aliases on a bus in busCore, and that bus's
//     core module is loaded;
//   - it has no such aliases and no module depends on it (a file system, a
//     RAID level, the power button);
//   - a module that is loaded depends on it.
//
// With no PCI device listed (sysfs unreadable, a machine without PCI) every
// module is loaded: leaving out a driver the machine needs costs far more
// than loading one it does not.
func Select(order []string, deps map[string][]string, aliases []Alias, pci []string) (load, skip []string) {
	if len(pci) == 0 {
		return order, nil
	}
	byFile := map[string][]string{}
	for _, a := range aliases {
		byFile[a.File] = append(byFile[a.File], a.Pattern)
	}
	needed := map[string]bool{} // some module depends on it
	for _, ds := range deps {
		for _, d := range ds {
			needed[d] = true
		}
	}
	want := map[string]bool{}
	var add func(string)
	add = func(f string) {
		if want[f] {
			return
		}
		want[f] = true
		for _, d := range deps[f] {
			add(d)
		}
	}
	children := map[string][]string{} // module → bus cores it waits for
	for _, f := range order {
		var pciPats []string
		var cores []string
		for _, p := range byFile[f] {
			bus, _, _ := strings.Cut(p, ":")
			if bus == "pci" {
				pciPats = append(pciPats, p)
			} else if c, ok := busCore[bus]; ok {
				cores = append(cores, c)
			}
		}
		switch {
		case len(pciPats) > 0:
			if matchAny(pciPats, pci) {
				add(f)
			}
		case len(cores) > 0:
			children[f] = cores
		case !needed[f]:
			add(f)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, f := range order {
			cores, ok := children[f]
			if !ok || want[f] {
				continue
			}
			for _, c := range cores {
				if want[c] {
					add(f)
					changed = true
					break
				}
			}
		}
	}
	for _, f := range order {
		if want[f] {
			load = append(load, f)
		} else {
			skip = append(skip, f)
		}
	}
	return load, skip
}

func matchAny(patterns, modaliases []string) bool {
	for _, m := range modaliases {
		for _, p := range patterns {
			if ok, _ := path.Match(p, m); ok {
				return true
			}
		}
	}
	return false
}

// PCIModaliases lists the modaliases of the PCI devices under sysfs
// (normally /sys/bus/pci/devices).
func PCIModaliases(sysfs string) ([]string, error) {
	ents, err := os.ReadDir(sysfs)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(sysfs, e.Name(), "modalias"))
		if err != nil {
			continue
		}
		if m := strings.TrimSpace(string(b)); m != "" {
			out = append(out, m)
		}
	}
	return out, nil
}
