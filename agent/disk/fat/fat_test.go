package fat

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/internal/testtool"
)

func needTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testtool.Need(t, tool)
	}
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// buildFS makes a FAT filesystem of the given type with mkfs.vfat and fills
// it with mtools: files that span clusters, long and short names, and a
// directory large enough to span clusters itself.
func buildFS(t *testing.T, bits int, sizeMiB int64) (string, map[string][]byte) {
	t.Helper()
	needTools(t, "mkfs.vfat", "mmd", "mcopy")
	img := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, sizeMiB<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.vfat", "-F", fmt.Sprint(bits), "-n", "ESP", img)
	r := rand.New(rand.NewPCG(uint64(bits), 1))
	files := map[string][]byte{
		"EFI/BOOT/BOOTX64.EFI":           make([]byte, 70_000),
		"EFI/debian/shimx64.efi":         make([]byte, 9_000),
		"EFI/debian/grubx64.efi":         []byte("grub"),
		"EFI/fedora/BOOTX64.CSV":         []byte("csv"),
		"a-long-file-name-with-Case.txt": []byte("long name"),
		"empty":                          {},
	}
	for i := range 40 {
		files[fmt.Sprintf("EFI/many/file-number-%02d.bin", i)] = []byte(fmt.Sprint(i))
	}
	for _, b := range files {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	src := t.TempDir()
	for _, d := range []string{"EFI", "EFI/BOOT", "EFI/debian", "EFI/fedora", "EFI/many"} {
		run(t, "mmd", "-i", img, "::"+d)
	}
	for name, b := range files {
		p := filepath.Join(src, strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "mcopy", "-i", img, p, "::"+name)
	}
	return img, files
}

func TestReadFATTypes(t *testing.T) {
	for _, c := range []struct {
		bits int
		mib  int64
	}{{12, 2}, {16, 32}, {32, 48}} {
		t.Run(fmt.Sprintf("FAT%d", c.bits), func(t *testing.T) {
			img, files := buildFS(t, c.bits, c.mib)
			f, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fsys, err := Open(f, c.mib<<20)
			if err != nil {
				t.Fatal(err)
			}
			if fsys.Bits() != c.bits {
				t.Fatalf("read as FAT%d", fsys.Bits())
			}
			for name, want := range files {
				got, err := fsys.ReadFile(strings.ToUpper(name), 1<<20)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: %d bytes differ from the %d written", name, len(got), len(want))
				}
			}
			ents, err := fsys.ReadDir("efi/debian")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"grubx64.efi", "shimx64.efi"}) {
				t.Fatalf("EFI/debian holds %q", names)
			}
			if ents, err := fsys.ReadDir("/EFI/many"); err != nil || len(ents) != 40 {
				t.Fatalf("EFI/many: %d entries, %v", len(ents), err)
			}
			if _, err := fsys.Stat("EFI/none/x.efi"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("missing file: %v", err)
			}
			if _, err := fsys.ReadFile("EFI/BOOT/BOOTX64.EFI", 1000); err == nil {
				t.Fatal("a file over the size limit was read")
			}
		})
	}
}

func TestOpenRefusesNonFAT(t *testing.T) {
	for name, b := range map[string][]byte{
		"zeros":      make([]byte, 4096),
		"short":      {0x55, 0xaa},
		"mbr no bpb": append(make([]byte, 510), 0x55, 0xaa),
	} {
		if _, err := Open(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// FuzzFAT reads whatever a corrupt filesystem claims without panicking or
// looping.
func FuzzFAT(f *testing.F) {
	b := make([]byte, 64<<10)
	copy(b, []byte{0xeb, 0x3c, 0x90, 'm', 'k', 'f', 's', '.', 'f', 'a', 't', 0, 2, 1, 1, 0, 2, 16, 0, 128, 0, 0xf8, 1, 0})
	b[510], b[511] = 0x55, 0xaa
	f.Add(b[:1024])
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		fsys.ReadDir("")
		fsys.ReadFile("EFI/BOOT/BOOTX64.EFI", 1<<20)
		fsys.ReadDir("EFI/BOOT")
	})
}
