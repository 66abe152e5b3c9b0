package inventory

import (
	"os"
	"path/filepath"
	"testing"
)

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
		if got := byPath(tc.name, real, real); got != tc.byPath {
			t.Errorf("%s: byPath = %q, want %q", tc.name, got, tc.byPath)
		}
		if got := transport(tc.name, real); got != tc.tran {
			t.Errorf("%s: transport = %q, want %q", tc.name, got, tc.tran)
		}
	}
}
