package hwmgr

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/efi"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

const espSize = 16 << 20

// utf16CSV encodes a BOOT<ARCH>.CSV line as shim ships it: UTF-16LE with a
// byte-order mark.
func utf16CSV(line string) []byte {
	u := utf16.Encode([]rune("\ufeff" + line))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// espDisk builds a whole-disk image with espDiskImage and attaches it as a
// loop device.
func espDisk(t *testing.T, files map[string][]byte) string {
	t.Helper()
	img := espDiskImage(t, files)
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--partscan", img))
	t.Cleanup(func() { run(t, "losetup", "-d", dev) })
	return dev
}

// espDiskImage builds a 40 MiB whole-disk image with a 16 MiB ESP (FAT16,
// made by mkfs.vfat and filled with mtools) holding files, and a Linux
// partition.
func espDiskImage(t *testing.T, files map[string][]byte) string {
	t.Helper()
	need(t, "sgdisk", "mkfs.vfat", "mmd", "mcopy")
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 40<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+16M", "-t1:EF00", "-c1:EFI System", "-n2:0:0", "-t2:8300", img)
	esp := filepath.Join(dir, "esp.img")
	if err := os.WriteFile(esp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(esp, espSize); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.vfat", "-n", "ESP", esp)
	made := map[string]bool{}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		parts := strings.Split(name, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/")
			if !made[d] {
				t.Setenv("MTOOLS_SKIP_CHECK", "1")
				run(t, "mmd", "-i", esp, "::"+d)
				made[d] = true
			}
		}
		src := filepath.Join(dir, "src-"+strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(src, files[name], 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "mcopy", "-i", esp, src, "::"+name)
	}
	fs, err := os.ReadFile(esp)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(fs, 2048*512); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return img
}

var partGUID = regexp.MustCompile(`Partition unique GUID: ([0-9A-Fa-f-]+)`)

// TestInstallBootloaderUEFI installs the boot entry for ESPs laid out as
// Debian, Fedora and a fallback-only image do, into an efivarfs-format
// directory that already holds a firmware entry, and decodes what was
// written: the entry must be first in BootOrder and point at the ESP's
// partition number, start, size and GUID, and at the loader IPA picks.
func TestInstallBootloaderUEFI(t *testing.T) {
	arch := efiArch()
	ARCH := strings.ToUpper(arch)
	loader := []byte("MZ not really a PE image")
	cases := []struct {
		name      string
		files     map[string][]byte
		path      string
		label     string
		wantError string
	}{
		{name: "debian", files: map[string][]byte{
			"EFI/debian/shim" + arch + ".efi": loader, "EFI/debian/grub" + arch + ".efi": loader,
			"EFI/debian/grub.cfg": []byte("search.fs_uuid x root\n"), "EFI/BOOT/BOOT" + ARCH + ".EFI": loader,
		}, path: `\EFI\debian\shim` + arch + `.efi`, label: "ironic1"},
		{name: "fedora", files: map[string][]byte{
			"EFI/fedora/shim" + arch + ".efi": loader, "EFI/fedora/grub" + arch + ".efi": loader,
			"EFI/fedora/BOOT" + ARCH + ".CSV": utf16CSV("shim" + arch + ".efi,Fedora,,This is the boot entry for Fedora\r\n"),
			"EFI/BOOT/BOOT" + ARCH + ".EFI":   loader, "EFI/BOOT/fb" + arch + ".efi": loader,
		}, path: `\EFI\fedora\shim` + arch + `.efi`, label: "Fedora"},
		{name: "grub only", files: map[string][]byte{"EFI/ubuntu/grub" + arch + ".efi": loader},
			path: `\EFI\ubuntu\grub` + arch + `.efi`, label: "ironic1"},
		{name: "fallback only", files: map[string][]byte{"EFI/BOOT/BOOT" + ARCH + ".EFI": loader},
			path: `\EFI\BOOT\BOOT` + ARCH + `.EFI`, label: "ironic1"},
		{name: "no loader", files: map[string][]byte{"EFI/vendor/readme.txt": []byte("x")},
			wantError: "no boot loader on the EFI system partition"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := espDisk(t, c.files)
			vars := efi.Vars{Dir: t.TempDir()}
			pxe, _ := efi.LoadOption{Attributes: efi.LoadOptionActive, Description: "UEFI PXEv4", Path: `\pxe`}.MarshalBinary()
			if err := vars.Set("Boot0000", efi.GlobalGUID, efi.BootAttrs, pxe); err != nil {
				t.Fatal(err)
			}
			if err := vars.SetBootOrder([]uint16{0}); err != nil {
				t.Fatal(err)
			}
			// A fresh manager: the disk is found by the ESP's UUID, as after
			// an agent restart between write_image and install_bootloader.
			m := New(Options{EFIVarsDir: vars.Dir})
			tbl, err := disk.ReadTable(dev)
			if err != nil {
				t.Fatal(err)
			}
			p := proto.InstallBootloaderParams{RootUUID: tbl.Partitions[1].UUID, EFISystemPartUUID: tbl.Partitions[0].UUID, TargetBootMode: "uefi"}
			safety := steps.Safety{Allow: []string{dev}}
			for range 2 { // a second install replaces the entry rather than adding one
				err = m.InstallBootloader(context.Background(), p, safety)
				if c.wantError != "" {
					if err == nil || !strings.Contains(err.Error(), c.wantError) {
						t.Fatalf("err = %v, want %q", err, c.wantError)
					}
					if order, _ := vars.BootOrder(); !slices.Equal(order, []uint16{0}) {
						t.Fatalf("BootOrder changed to %v", order)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			order, err := vars.BootOrder()
			if err != nil || len(order) != 2 || order[1] != 0 {
				t.Fatalf("BootOrder %v (%v), want the new entry then Boot0000", order, err)
			}
			ents, err := vars.BootEntries()
			if err != nil || len(ents) != 2 {
				t.Fatalf("entries %+v, %v", ents, err)
			}
			var got efi.LoadOption
			for _, e := range ents {
				if e.Number == order[0] {
					got = e.Option
				}
			}
			m1 := partGUID.FindStringSubmatch(run(t, "sgdisk", "-i", "1", dev))
			if m1 == nil {
				t.Fatal("sgdisk -i 1 gave no partition GUID")
			}
			guid, err := disk.GUIDBytes(m1[1])
			if err != nil {
				t.Fatal(err)
			}
			want := efi.HardDrive{PartitionNumber: 1, Start: 2048, Size: espSize / 512, PartitionGUID: guid}
			if got.Disk != want || got.Path != c.path || got.Description != c.label || got.Attributes != efi.LoadOptionActive {
				t.Fatalf("entry %+v\nwant disk %+v path %s label %s", got, want, c.path, c.label)
			}
			if len(got.Optional) != 0 {
				t.Fatalf("optional data %x", got.Optional)
			}
		})
	}
}

// TestInstallBootloaderBIOSWholeDisk: nothing to do, as IPA, and nothing
// written to the disk or the variables.
func TestInstallBootloaderBIOSWholeDisk(t *testing.T) {
	dev := espDisk(t, map[string][]byte{"EFI/BOOT/BOOTX64.EFI": []byte("x")})
	before := sha256File(t, dev, 0)
	vars := t.TempDir()
	m := New(Options{EFIVarsDir: vars})
	tbl, _ := disk.ReadTable(dev)
	err := m.InstallBootloader(context.Background(), proto.InstallBootloaderParams{RootUUID: tbl.Partitions[1].UUID, TargetBootMode: "bios"}, steps.Safety{Allow: []string{dev}})
	if err != nil {
		t.Fatal(err)
	}
	if sha256File(t, dev, 0) != before {
		t.Fatal("the disk changed")
	}
	if ents, _ := os.ReadDir(vars); len(ents) != 0 {
		t.Fatalf("variables written: %v", ents)
	}
	if err := m.InstallBootloader(context.Background(), proto.InstallBootloaderParams{TargetBootMode: "legacy"}, steps.Safety{Allow: []string{dev}}); err == nil {
		t.Fatal("an unknown boot mode was accepted")
	}
}

// TestInstallBootloaderAfterWriteImage is Ironic's UEFI whole-disk deploy:
// write_image onto a larger disk (the backup GPT moves to its end), then
// install_bootloader with the UUIDs write_image reported; the entry must
// point at the ESP as it lies on the target disk.
func TestInstallBootloaderAfterWriteImage(t *testing.T) {
	arch := efiArch()
	img := espDiskImage(t, map[string][]byte{"EFI/BOOT/BOOT" + strings.ToUpper(arch) + ".EFI": []byte("MZ")})
	base := serve(t, map[string]string{"disk.img": img})
	dev := loopDevice(t, 64<<20)
	vars := efi.Vars{Dir: t.TempDir()}
	m := New(Options{ImageRetries: -1, EFIVarsDir: vars.Dir})
	res, err := m.WriteImage(context.Background(), writeReq(base+"/disk.img", sha256File(t, img, 0), dev, nil))
	if err != nil {
		t.Fatal(err)
	}
	p := proto.InstallBootloaderParams{RootUUID: res.PartitionUUIDs.RootUUID, EFISystemPartUUID: res.PartitionUUIDs.EFISystemPartUUID, TargetBootMode: "uefi"}
	if err := m.InstallBootloader(context.Background(), p, steps.Safety{Allow: []string{dev}}); err != nil {
		t.Fatal(err)
	}
	ents, err := vars.BootEntries()
	if err != nil || len(ents) != 1 {
		t.Fatalf("entries %+v, %v", ents, err)
	}
	guid, _ := disk.GUIDBytes(res.PartitionUUIDs.EFISystemPartUUID)
	want := efi.LoadOption{Attributes: efi.LoadOptionActive, Description: "ironic1", Path: `\EFI\BOOT\BOOT` + strings.ToUpper(arch) + ".EFI",
		Disk: efi.HardDrive{PartitionNumber: 1, Start: 2048, Size: espSize / 512, PartitionGUID: guid}}
	got := ents[0].Option
	got.Optional = nil
	if got.Attributes != want.Attributes || got.Description != want.Description || got.Path != want.Path || got.Disk != want.Disk {
		t.Fatalf("entry %+v, want %+v", got, want)
	}
	if order, _ := vars.BootOrder(); !slices.Equal(order, []uint16{ents[0].Number}) {
		t.Fatalf("BootOrder %v", order)
	}
}
