package disk

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseVPDDeviceID(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		want       WWN
		wantErr    bool
	}{
		{"naa5", "0083000c 01030008 5002538e40a1b2c3", WWN{WWN: "0x5002538e40a1b2c3", WithExtension: "0x5002538e40a1b2c3"}, false},
		{"naa6 after a target-port designator", "00830020 61930008 5000c500a1b2c3d5 01030010 6000c500a1b2c3d40000000000001234",
			WWN{WWN: "0x6000c500a1b2c3d4", WithExtension: "0x6000c500a1b2c3d40000000000001234", VendorExtension: "0x0000000000001234"}, false},
		{"eui64 only", "0083000c 01020008 0025388b91c3f4a1", WWN{WWN: "0x0025388b91c3f4a1", WithExtension: "0x0025388b91c3f4a1"}, false},
		{"t10 only", "00830008 02010004 41544120", WWN{}, true},
		{"truncated designator", "00830010 01030008 5002", WWN{}, true},
		{"wrong page", "0080000c 01030008 5002538e40a1b2c3", WWN{}, true},
		{"empty", "", WWN{}, true},
	} {
		got, err := ParseVPDDeviceID(mustHex(t, tc.page))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseVPDSerial(t *testing.T) {
	got, err := ParseVPDSerial(append(mustHex(t, "00800014"), "      S45PNA0M123456"...))
	if err != nil || got != "S45PNA0M123456" {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = ParseVPDSerial(append(mustHex(t, "00800004"), "AB\x00\x00extra"...))
	if err != nil || got != "AB" {
		t.Errorf("length-bounded: got %q, %v", got, err)
	}
	if _, err := ParseVPDSerial(mustHex(t, "0083")); err == nil {
		t.Error("short page accepted")
	}
}

func TestWWNFromWWID(t *testing.T) {
	for in, want := range map[string]WWN{
		"naa.5002538e40a1b2c3":                 {WWN: "0x5002538e40a1b2c3", WithExtension: "0x5002538e40a1b2c3"},
		"naa.6000c500a1b2c3d40000000000001234": {WWN: "0x6000c500a1b2c3d4", WithExtension: "0x6000c500a1b2c3d40000000000001234", VendorExtension: "0x0000000000001234"},
		"eui.002538b911b2c3d4\n":               {WWN: "eui.002538b911b2c3d4", WithExtension: "eui.002538b911b2c3d4"},
		"t10.ATA     QEMU HARDDISK":            {},
		"naa.zz":                               {},
		"":                                     {},
	} {
		if got := WWNFromWWID(in); got != want {
			t.Errorf("WWNFromWWID(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func FuzzParseVPD(f *testing.F) {
	f.Add(mustHex(f, "00830020619300085000c500a1b2c3d5010300106000c500a1b2c3d40000000000001234"))
	f.Add(mustHex(f, "00800014202020202020533435504e41304d313233343536"))
	f.Add([]byte{0, 0x83, 0xff, 0xff, 1, 3, 0, 200})
	f.Fuzz(func(t *testing.T, page []byte) {
		w, err := ParseVPDDeviceID(page)
		if err == nil && (!strings.HasPrefix(w.WWN, "0x") || !strings.HasPrefix(w.WithExtension, w.WWN)) {
			t.Fatalf("inconsistent WWN %+v", w)
		}
		s, err := ParseVPDSerial(page)
		if err == nil && len(s) > len(page) {
			t.Fatalf("serial longer than page")
		}
	})
}

// TestByPathAndTransport covers the buses the machine1 fixture does not:
// virtio-scsi, USB mass storage and eMMC.
func TestByPathAndTransport(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("devices/pci0000:00/0000:00:05.0/virtio3/host1") // a lower host on the same adapter
	for _, tc := range []struct {
		name, path, byPath, tran string
	}{
		{"sdc", "devices/pci0000:00/0000:00:05.0/virtio3/host2/target2:0:1/2:0:1:3/block/sdc", "pci-0000:00:05.0-scsi-1:0:1:3", ""},
		{"sdd", "devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdd", "pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0", "usb"},
		{"mmcblk0", "devices/platform/soc/mmc0/mmc0:0001/block/mmcblk0", "", "mmc"},
		{"sde", "devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:1:0/2:1:0:0/block/sde", "pci-0000:00:1f.2-ata-3.1.0", "sata"},
	} {
		real := mk(tc.path)
		if got := pathID(tc.name, real, real); got != tc.byPath {
			t.Errorf("%s: pathID = %q, want %q", tc.name, got, tc.byPath)
		}
		if got := transport(tc.name, real); got != tc.tran {
			t.Errorf("%s: transport = %q, want %q", tc.name, got, tc.tran)
		}
	}
}
