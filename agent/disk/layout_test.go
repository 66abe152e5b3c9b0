package disk

import "testing"

// TestLayoutFor follows ironic-lib's make_partitions: the disk label from
// the boot mode unless given, an ESP for local UEFI boot, a BIOS boot
// partition for local BIOS boot from a GPT disk, the boot flag for local
// BIOS boot from an MBR disk.
func TestLayoutFor(t *testing.T) {
	for _, c := range []struct {
		mode, option, label string
		want                Layout
		bad                 bool
	}{
		{"uefi", "local", "", Layout{Label: "gpt", ESPMB: 200, RootMB: 10}, false},
		{"uefi", "netboot", "", Layout{Label: "gpt", RootMB: 10}, false},
		{"bios", "local", "", Layout{Label: "msdos", RootMB: 10, BootFlag: true}, false},
		{"", "", "", Layout{Label: "msdos", RootMB: 10, BootFlag: true}, false},
		{"bios", "local", "gpt", Layout{Label: "gpt", BIOSBootMB: 1, RootMB: 10}, false},
		{"bios", "netboot", "msdos", Layout{Label: "msdos", RootMB: 10}, false},
		{"uefi", "local", "msdos", Layout{Label: "msdos", ESPMB: 200, RootMB: 10}, false},
		{"legacy", "local", "", Layout{}, true},
		{"bios", "kexec", "", Layout{}, true},
		{"bios", "local", "sun", Layout{}, true},
	} {
		got, err := LayoutFor(c.mode, c.option, c.label, 10, 0, 0, 0)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("LayoutFor(%q, %q, %q) = %+v, %v; want %+v", c.mode, c.option, c.label, got, err, c.want)
		}
	}
	if _, err := LayoutFor("bios", "local", "", 10, -1, 0, 0); err == nil {
		t.Error("a negative swap size was accepted")
	}
}
