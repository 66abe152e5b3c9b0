package efi

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/internal/testtool"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadOptionBytes checks the encoding byte for byte against the UEFI
// specification's layout (EFI_LOAD_OPTION, §3.1.3; hard drive media path
// §10.3.5.1; file path media path §10.3.5.4).
func TestLoadOptionBytes(t *testing.T) {
	o := LoadOption{
		Attributes:  LoadOptionActive,
		Description: "d",
		Disk: HardDrive{PartitionNumber: 2, Start: 0x800, Size: 0x2000,
			PartitionGUID: [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		Path: `\a`,
	}
	want := unhex(t, `
		01000000 3800 6400 0000
		04 01 2a00 02000000 0008000000000000 0020000000000000
		000102030405060708090a0b0c0d0e0f 02 02
		04 04 0a00 5c00 6100 0000
		7f ff 0400`)
	got, err := o.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	back, err := ParseLoadOption(got)
	if err != nil {
		t.Fatal(err)
	}
	back.Optional = nil
	if back.Attributes != o.Attributes || back.Description != o.Description || back.Disk != o.Disk || back.Path != o.Path {
		t.Fatalf("decoded %+v, want %+v", back, o)
	}
}

func TestLoadOptionRefused(t *testing.T) {
	for _, o := range []LoadOption{
		{Description: "", Path: `\EFI\BOOT\BOOTX64.EFI`},
		{Description: "x", Path: `EFI\BOOT\BOOTX64.EFI`},
		{Description: "x", Path: `\EFI/BOOT/BOOTX64.EFI`},
	} {
		if _, err := o.MarshalBinary(); err == nil {
			t.Errorf("%+v encoded", o)
		}
	}
	for _, b := range [][]byte{nil, {1, 0, 0, 0, 4, 0, 'a'}, {1, 0, 0, 0, 0xff, 0, 'a', 0, 0, 0}} {
		if _, err := ParseLoadOption(b); err == nil {
			t.Errorf("%x decoded", b)
		}
	}
}

func entry(desc, path string, part uint32) LoadOption {
	return LoadOption{Attributes: LoadOptionActive, Description: desc, Path: path,
		Disk: HardDrive{PartitionNumber: part, Start: 2048, Size: 8192}}
}

func TestAddBootEntry(t *testing.T) {
	v := Vars{Dir: t.TempDir()}
	// Firmware's own entries and an entry from an earlier deploy.
	for n, o := range map[string]LoadOption{
		"Boot0000": entry("UEFI PXEv4", `\pxe`, 9),
		"Boot0001": entry("ironic1", `\EFI\old\grubx64.efi`, 1),
		"Boot0003": entry("UEFI Shell", `\shell.efi`, 9),
	} {
		b, _ := o.MarshalBinary()
		if err := v.Set(n, GlobalGUID, BootAttrs, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.SetBootOrder([]uint16{0, 1, 3}); err != nil {
		t.Fatal(err)
	}
	num, err := v.AddBootEntry(entry("ironic1", `\EFI\debian\shimx64.efi`, 2))
	if err != nil {
		t.Fatal(err)
	}
	if num != 1 {
		t.Fatalf("new entry Boot%04X, want the freed Boot0001", num)
	}
	order, err := v.BootOrder()
	if err != nil || !slices.Equal(order, []uint16{1, 0, 3}) {
		t.Fatalf("BootOrder %v (%v), want [1 0 3]", order, err)
	}
	ents, err := v.BootEntries()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Option.Description+" "+e.Option.Path)
	}
	want := []string{`UEFI PXEv4 \pxe`, `ironic1 \EFI\debian\shimx64.efi`, `UEFI Shell \shell.efi`}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	attrs, _, err := v.Get("Boot0001", GlobalGUID)
	if err != nil || attrs != BootAttrs {
		t.Fatalf("attributes %#x, %v", attrs, err)
	}
	// A second entry with another label takes the next free number.
	if num, err := v.AddBootEntry(entry("ironic2", `\EFI\BOOT\BOOTX64.EFI`, 2)); err != nil || num != 2 {
		t.Fatalf("second entry Boot%04X, %v", num, err)
	}
	if order, _ := v.BootOrder(); !slices.Equal(order, []uint16{2, 1, 0, 3}) {
		t.Fatalf("BootOrder %v", order)
	}
	if err := v.Delete("Boot0002", GlobalGUID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Get("Boot0002", GlobalGUID); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted variable: %v", err)
	}
}

// TestSetClearsImmutable writes over a variable file marked immutable, as
// efivarfs marks them.
func TestSetClearsImmutable(t *testing.T) {
	testtool.Need(t, "chattr")
	if os.Geteuid() != 0 {
		t.Skip("setting the immutable flag needs root")
	}
	v := Vars{Dir: t.TempDir()}
	if err := v.Set("BootOrder", GlobalGUID, BootAttrs, []byte{1, 0, 2, 0}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(v.Dir, "BootOrder-"+GlobalGUID)
	if out, err := exec.Command("chattr", "+i", p).CombinedOutput(); err != nil {
		t.Skipf("the test directory's filesystem has no immutable flag: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", p).Run() })
	if err := os.WriteFile(p, []byte("x"), 0o644); err == nil {
		t.Fatal("the immutable flag did not stop a plain write")
	}
	if err := v.SetBootOrder([]uint16{3}); err != nil {
		t.Fatal(err)
	}
	if order, err := v.BootOrder(); err != nil || !slices.Equal(order, []uint16{3}) {
		t.Fatalf("BootOrder %v, %v", order, err)
	}
}
