package boot

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestISOBuilder(t *testing.T) {
	dir := t.TempDir()
	b := NewISOBuilder(ISOConfig{Dir: dir, FilesURL: "http://ctrl:6385/boot/files"})
	if err := b.Check(); err != nil {
		t.Skipf("%v (install binutils, dosfstools, mtools, xorriso, systemd-boot-efi)", err)
	}
	kernel := make([]byte, 2<<20)
	_, _ = rand.Read(kernel)
	if err := os.WriteFile(filepath.Join(dir, "kiln-agent.kernel"), kernel, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kiln-agent.initramfs"), []byte("INITRAMFS-MARKER"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmdline := Cmdline(map[string]string{"ipa-api-url": "http://ctrl:6385", "ipa-agent-token": "tok-0123456789abcdefghijklmnopqrstuvwxyz"}, []string{"console=ttyS0"})
	if cmdline != "ipa-agent-token=tok-0123456789abcdefghijklmnopqrstuvwxyz ipa-api-url=http://ctrl:6385 console=ttyS0" {
		t.Fatalf("cmdline %q", cmdline)
	}
	url, err := b.Build(context.Background(), "node-1", "", "", cmdline, nil)
	if err != nil {
		t.Fatal(err)
	}
	if url != "http://ctrl:6385/boot/files/iso/node-1.iso" {
		t.Errorf("url %q", url)
	}
	iso, err := os.ReadFile(filepath.Join(dir, "iso", "node-1.iso"))
	if err != nil {
		t.Fatal(err)
	}
	// Everything is stored uncompressed: the UKI inside the FAT image inside
	// the ISO carries the command line, the kernel and the initramfs.
	for _, want := range [][]byte{[]byte(cmdline), kernel[:4096], []byte("INITRAMFS-MARKER")} {
		if !bytes.Contains(iso, want) {
			t.Errorf("ISO lacks %.40q", want)
		}
	}
	if out, err := exec.Command("xorriso", "-indev", filepath.Join(dir, "iso", "node-1.iso"), "-report_el_torito", "plain").CombinedOutput(); err != nil || !strings.Contains(string(out), "UEFI") {
		t.Errorf("no UEFI El Torito boot image: %v\n%s", err, out)
	}
	if err := b.Remove("node-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "iso", "node-1.iso")); !os.IsNotExist(err) {
		t.Errorf("ISO not removed: %v", err)
	}
	if err := b.Remove("node-1"); err != nil {
		t.Errorf("removing twice: %v", err)
	}
	if _, err := b.Build(context.Background(), "../evil", "", "", cmdline, nil); err == nil {
		t.Error("node identifier with a path accepted")
	}
	if _, err := b.Build(context.Background(), "n2", "../../etc/passwd", "", cmdline, nil); err == nil {
		t.Error("kernel outside the boot directory accepted")
	}
}

// A node with network data gets it appended to the ISO's initramfs, in the
// same cpio form the per-node ramdisk carries.
func TestISOBuilderNetworkData(t *testing.T) {
	dir := t.TempDir()
	b := NewISOBuilder(ISOConfig{Dir: dir, FilesURL: "http://ctrl:6385/boot/files"})
	if err := b.Check(); err != nil {
		t.Skipf("%v (install binutils, dosfstools, mtools, xorriso, systemd-boot-efi)", err)
	}
	for name, body := range map[string][]byte{"kiln-agent.kernel": bytes.Repeat([]byte{0x4b}, 1<<20), "kiln-agent.initramfs": []byte("INITRAMFS-MARKER-ODD!")} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := []byte("interfaces:\n- name: eno1\n  type: ethernet\n  ipv4: {address: [{ip: 192.0.2.7, prefix-length: 24}]}\n")
	if _, err := b.Build(context.Background(), "node-2", "", "", "console=ttyS0", data); err != nil {
		t.Fatal(err)
	}
	iso, err := os.ReadFile(filepath.Join(dir, "iso", "node-2.iso"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := NetworkDataArchive(data)
	if err != nil {
		t.Fatal(err)
	}
	// 21 bytes of initramfs: three zero bytes put the archive on a 4-byte
	// boundary, where the kernel looks for it.
	if want := append([]byte("INITRAMFS-MARKER-ODD!\x00\x00\x00"), archive...); !bytes.Contains(iso, want) {
		t.Errorf("the ISO's initramfs is not the agent's, padded, followed by the network data archive")
	}
}
