package hwmgr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/fat"
	"github.com/kilnhq/kiln/agent/efi"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// errNoLoader is an ESP without a boot loader IPA would register; IPA then
// falls back to the image's own grub-install.
var errNoLoader = errors.New("no boot loader on the EFI system partition")

// InstallBootloader is image.install_bootloader, as IPA does it:
//   - UEFI: the loader on the written image's ESP gets a Boot#### entry,
//     first in BootOrder; an ESP without one falls back to the image's GRUB.
//   - BIOS: nothing for a whole-disk image (its boot sector is the image's);
//     for a partition image, the image's own grub-install through a chroot.
//
// target_boot_mode decides; when absent, the mode the ramdisk booted in.
// ignore_bootloader_failure turns a failure into a logged warning.
func (m *Manager) InstallBootloader(ctx context.Context, p proto.InstallBootloaderParams, s steps.Safety) error {
	err := m.installBootloader(ctx, p, s)
	if err != nil && p.IgnoreBootloaderFailure {
		m.log.Warn("boot loader installation failed; ignored as ignore_bootloader_failure asks", "err", err)
		return nil
	}
	return err
}

func (m *Manager) installBootloader(ctx context.Context, p proto.InstallBootloaderParams, s steps.Safety) error {
	mode := p.TargetBootMode
	if mode == "" {
		mode = m.currentBootMode()
	}
	if mode != "uefi" && mode != "bios" {
		return fmt.Errorf("install boot loader: target_boot_mode %q: want uefi or bios", mode)
	}
	dev, partitionImage, err := m.bootDevice(p, s)
	if err != nil {
		return fmt.Errorf("install boot loader: %w", err)
	}
	if arr, ok := m.mdArray(dev); ok {
		return m.installOnRAID(ctx, dev, arr, mode, p, s)
	}
	if mode == "uefi" {
		err := m.registerUEFILoader(dev, p.EFISystemPartUUID)
		if !errors.Is(err, errNoLoader) {
			return err
		}
		if !partitionImage {
			return fmt.Errorf("install boot loader on %s: %w, and a whole-disk image has no root partition to run grub-install from", dev, err)
		}
		m.log.Warn("no boot loader on the ESP; installing the image's GRUB", "device", dev)
	}
	if !partitionImage || p.RootUUID == "" || p.RootUUID == "0x00000000" {
		// IPA: "This is normal for whole disk images."
		m.log.Info("no boot loader to install for a whole-disk image in BIOS mode", "device", dev)
		return nil
	}
	if err := s.Check(dev); err != nil {
		return err
	}
	return m.installGrub(ctx, grubTarget{Device: dev, RootUUID: p.RootUUID, ESPUUID: p.EFISystemPartUUID, UEFI: mode == "uefi"})
}

// currentBootMode is how the ramdisk was booted, as IPA's get_boot_info.
func (m *Manager) currentBootMode() string {
	if _, err := os.Stat(filepath.Join(m.sysRoot(), "firmware/efi")); err == nil {
		return "uefi"
	}
	return "bios"
}

func (m *Manager) sysRoot() string {
	if m.opts.SysRoot != "" {
		return m.opts.SysRoot
	}
	return disk.DefaultSysRoot
}

func (m *Manager) efiVars() efi.Vars {
	if m.opts.EFIVarsDir != "" {
		return efi.Vars{Dir: m.opts.EFIVarsDir}
	}
	return efi.Vars{Dir: filepath.Join(m.sysRoot(), "firmware/efi/efivars")}
}

// bootDevice is the disk the last image went to, else (after an agent
// restart) the disk holding the partition or disk id Ironic names. It also
// says whether that disk holds a partition image, which only this agent's
// own write can tell: a disk found by UUID counts as a whole-disk image, so
// BIOS mode then installs nothing rather than overwrite an image's loader.
func (m *Manager) bootDevice(p proto.InstallBootloaderParams, s steps.Safety) (string, bool, error) {
	m.mu.Lock()
	last := m.written
	m.mu.Unlock()
	if last.Device != "" {
		return last.Device, last.Partition, nil
	}
	devs, err := m.candidates(s, nil)
	if err != nil {
		return "", false, err
	}
	want := []string{strings.ToLower(p.RootUUID), strings.ToLower(p.EFISystemPartUUID)}
	for _, d := range devs {
		t, err := disk.ReadTable(d.Name)
		if err != nil {
			continue
		}
		if slices.Contains(want, strings.ToLower(t.DiskID)) {
			return d.Name, false, nil
		}
		for _, part := range t.Partitions {
			if part.UUID != "" && slices.Contains(want, strings.ToLower(part.UUID)) {
				return d.Name, false, nil
			}
		}
	}
	return "", false, fmt.Errorf("no disk holds partition %q or %q, and no image was written by this agent", p.RootUUID, p.EFISystemPartUUID)
}

// registerUEFILoader finds the ESP of dev, picks its loader and writes the
// boot entry.
func (m *Manager) registerUEFILoader(dev, espUUID string) error {
	return m.registerUEFILoaderNamed(dev, espUUID, "")
}

// registerUEFILoaderNamed is registerUEFILoader with suffix added to the
// entry's description: entries with the same description replace each
// other, and each RAID member needs its own.
func (m *Manager) registerUEFILoaderNamed(dev, espUUID, suffix string) error {
	t, err := disk.ReadTable(dev)
	if err != nil {
		return fmt.Errorf("install UEFI boot entry: %w", err)
	}
	if t.Type != "gpt" {
		return fmt.Errorf("install UEFI boot entry on %s: the disk has an %s partition table; the entry needs a GPT partition GUID", dev, t.Type)
	}
	var esp *disk.Partition
	for i, part := range t.Partitions {
		if part.Type == disk.GPTTypeESP || (espUUID != "" && strings.EqualFold(part.UUID, espUUID)) {
			esp = &t.Partitions[i]
			break
		}
	}
	if esp == nil {
		return fmt.Errorf("install UEFI boot entry: no EFI system partition on %s and none recorded during deployment: is the image UEFI-compatible?", dev)
	}
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("install UEFI boot entry: %w", err)
	}
	defer f.Close()
	fsys, err := fat.Open(io.NewSectionReader(f, esp.Start, esp.Size), esp.Size)
	if err != nil {
		return fmt.Errorf("install UEFI boot entry: EFI system partition %d of %s: %w", esp.Number, dev, err)
	}
	ld, err := pickLoader(fsys, efiArch())
	if err != nil {
		return fmt.Errorf("EFI system partition %d of %s: %w", esp.Number, dev, err)
	}
	guid, err := disk.GUIDBytes(esp.UUID)
	if err != nil {
		return fmt.Errorf("install UEFI boot entry: %w", err)
	}
	ss := int64(t.SectorSize)
	opt := efi.LoadOption{
		Attributes:  efi.LoadOptionActive,
		Description: ld.Label + suffix,
		Disk:        efi.HardDrive{PartitionNumber: uint32(esp.Number), Start: uint64(esp.Start / ss), Size: uint64(esp.Size / ss), PartitionGUID: guid},
		Path:        ld.Path,
	}
	num, err := m.efiVars().AddBootEntry(opt)
	if err != nil {
		return fmt.Errorf("install UEFI boot entry: %w", err)
	}
	m.log.Info("UEFI boot entry written", "device", dev, "partition", esp.Number, "loader", ld.Path,
		"label", ld.Label, "entry", fmt.Sprintf("Boot%04X", num))
	return nil
}

// efiArch is the suffix of the architecture's loader names (BOOTX64.EFI).
func efiArch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "aa64"
	case "riscv64":
		return "riscv64"
	case "386":
		return "ia32"
	}
	return "x64"
}

// loader is the boot loader chosen on an ESP.
type loader struct {
	Path  string // \EFI\debian\shimx64.efi
	Label string
}

// ipaLabel is the label IPA gives the entries it makes without a CSV.
const ipaLabel = "ironic1"

// pickLoader chooses the loader as IPA does, most specific first:
//  1. a BOOT<ARCH>.CSV (or BOOT.CSV) in EFI/<vendor>/ names the loader and
//     the label (shim's fallback reads the same file; Fedora, RHEL, SUSE);
//  2. the vendor's shim<arch>.efi, else its grub<arch>.efi (Debian, Ubuntu);
//  3. the removable-media path EFI/BOOT/BOOT<ARCH>.EFI.
//
// Vendors are tried in name order.
func pickLoader(fsys *fat.FS, arch string) (loader, error) {
	ents, err := fsys.ReadDir("EFI")
	if errors.Is(err, fs.ErrNotExist) {
		return loader{}, errNoLoader
	}
	if err != nil {
		return loader{}, err
	}
	var vendors []string
	for _, e := range ents {
		if e.IsDir && !strings.EqualFold(e.Name, "BOOT") {
			vendors = append(vendors, e.Name)
		}
	}
	slices.SortFunc(vendors, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	exists := func(p string) (string, bool) {
		e, err := fsys.Stat(p)
		if err != nil || e.IsDir {
			return "", false
		}
		return filepath.Join(filepath.Dir(p), e.Name), true
	}
	winPath := func(p string) string { return `\` + strings.ReplaceAll(p, "/", `\`) }
	for _, v := range vendors {
		for _, csv := range []string{"BOOT" + strings.ToUpper(arch) + ".CSV", "BOOT.CSV"} {
			b, err := fsys.ReadFile("EFI/"+v+"/"+csv, 64<<10)
			if err != nil {
				continue
			}
			file, label, err := parseBootCSV(b)
			if err != nil {
				return loader{}, fmt.Errorf("EFI/%s/%s: %w", v, csv, err)
			}
			p, ok := exists("EFI/" + v + "/" + file)
			if !ok {
				return loader{}, fmt.Errorf("EFI/%s/%s names %s, which is not there", v, csv, file)
			}
			return loader{Path: winPath(p), Label: label}, nil
		}
	}
	for _, v := range vendors {
		for _, name := range []string{"shim" + arch + ".efi", "grub" + arch + ".efi"} {
			if p, ok := exists("EFI/" + v + "/" + name); ok {
				return loader{Path: winPath(p), Label: ipaLabel}, nil
			}
		}
	}
	if p, ok := exists("EFI/BOOT/BOOT" + strings.ToUpper(arch) + ".EFI"); ok {
		return loader{Path: winPath(p), Label: ipaLabel}, nil
	}
	return loader{}, errNoLoader
}

// parseBootCSV reads shim's BOOT<ARCH>.CSV: UTF-16 (a byte-order mark is
// optional) lines of "loader,label,options,description"; the first line
// counts, as for IPA.
func parseBootCSV(b []byte) (file, label string, err error) {
	if len(b)%2 == 1 {
		b = b[:len(b)-1]
	}
	u := make([]uint16, 0, len(b)/2)
	be := len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff
	for i := 0; i+1 < len(b); i += 2 {
		c := uint16(b[i]) | uint16(b[i+1])<<8
		if be {
			c = uint16(b[i])<<8 | uint16(b[i+1])
		}
		u = append(u, c)
	}
	s := strings.TrimPrefix(string(utf16.Decode(u)), "\ufeff")
	line, _, _ := strings.Cut(s, "\n")
	fields := strings.SplitN(strings.TrimSpace(line), ",", 4)
	if len(fields) < 2 || fields[0] == "" || fields[1] == "" {
		return "", "", fmt.Errorf("not a loader,label line: %q", line)
	}
	if strings.ContainsAny(fields[0], `/\`) || fields[0] == ".." {
		return "", "", fmt.Errorf("loader %q is not a file name", fields[0])
	}
	return fields[0], fields[1], nil
}
