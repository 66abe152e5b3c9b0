package hwmgr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/fat"
)

// rootFS builds a 24 MiB ext4 filesystem image holding /etc/os-release.
func rootFS(t *testing.T) string {
	t.Helper()
	need(t, "mkfs.ext4")
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("ID=kilnpart\n"), 0o644)
	img := filepath.Join(t.TempDir(), "root.img")
	run(t, "mkfs.ext4", "-q", "-F", "-d", root, img, "24M")
	return img
}

func blkid(t *testing.T, tag, dev string) string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-s", tag, "-o", "value", dev).Output()
	return strings.TrimSpace(string(out))
}

// TestWritePartitionImageOnLoop deploys a partition image as Ironic's
// direct deploy sends one (image_type partition, root/swap/ephemeral
// sizes, boot mode and option, a config drive) onto loop devices, and
// checks the table, every partition's content and the UUIDs reported.
func TestWritePartitionImageOnLoop(t *testing.T) {
	need(t, "sgdisk", "blkid", "sfdisk")
	fsImg := rootFS(t)
	base := serve(t, map[string]string{"root.img": fsImg})
	sum := sha256File(t, fsImg, 0)
	iso := append([]byte("CD001"), make([]byte, 64<<10)...)
	cd, _ := json.Marshal(base64.StdEncoding.EncodeToString(gz(iso)))
	for _, c := range []struct {
		name, mode, label string
		wantTable         string
		wantParts         []string // blkid TYPE per partition, in order ("" for none)
		swap, eph         int
		cd                bool
	}{
		{name: "uefi", mode: "uefi", wantTable: "gpt", wantParts: []string{"vfat", "ext4", "swap", "", "ext4"}, swap: 8, eph: 16, cd: true},
		{name: "bios msdos", mode: "bios", wantTable: "dos", wantParts: []string{"swap", "ext4"}, swap: 8},
		{name: "bios gpt", mode: "bios", label: "gpt", wantTable: "gpt", wantParts: []string{"", "ext4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := loopDevice(t, 512<<20)
			req := writeReq(base+"/root.img", sum, dev, nil)
			if c.cd {
				req.Configdrive = cd
			}
			req.Info.ImageType = "partition"
			req.Info.RootMB, req.Info.SwapMB, req.Info.EphemeralMB = 32, c.swap, c.eph
			req.Info.EphemeralFormat = "ext4"
			req.Info.DeployBootMode, req.Info.BootOption, req.Info.DiskLabel = c.mode, "local", c.label
			req.Info.Kernel, req.Info.Ramdisk = "kernel-id", "ramdisk-id"
			m := New(Options{ImageRetries: -1})
			res, err := m.WriteImage(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := disk.ReadTable(dev)
			if err != nil {
				t.Fatal(err)
			}
			if tbl.Type != c.wantTable || len(tbl.Partitions) != len(c.wantParts) {
				t.Fatalf("table %+v", tbl)
			}
			if c.wantTable == "gpt" {
				if out := run(t, "sgdisk", "-v", dev); !strings.Contains(out, "No problems found") {
					t.Fatalf("sgdisk -v:\n%s", out)
				}
			}
			for i, want := range c.wantParts {
				p := dev + "p" + string(rune('1'+i))
				if got := blkid(t, "TYPE", p); got != want {
					t.Errorf("partition %d: TYPE %q, want %q", i+1, got, want)
				}
			}
			root := tbl.Partitions[len(tbl.Partitions)-1]
			if root.Size != 32<<20 {
				t.Errorf("root partition of %d bytes, want 32 MiB", root.Size)
			}
			rootNode := dev + "p" + string(rune('0'+root.Number))
			if got := hashRange(t, rootNode, 0, 24<<20); got != sum {
				t.Errorf("root partition differs from the image")
			}
			if u := blkid(t, "UUID", rootNode); u == "" || u != res.PartitionUUIDs.RootUUID {
				t.Errorf("root uuid %q, blkid says %q", res.PartitionUUIDs.RootUUID, u)
			}
			switch c.name {
			case "uefi":
				esp := tbl.Partitions[0]
				if esp.Type != disk.GPTTypeESP || esp.Size != 200<<20 || esp.UUID != res.PartitionUUIDs.EFISystemPartUUID {
					t.Errorf("ESP %+v, reported %q", esp, res.PartitionUUIDs.EFISystemPartUUID)
				}
				f, _ := os.Open(dev + "p1")
				defer f.Close()
				if fsys, err := fat.Open(f, esp.Size); err != nil || fsys.Bits() != 32 {
					t.Errorf("ESP filesystem: %v", err)
				}
				if l := blkid(t, "LABEL", dev+"p3"); l != "swap1" {
					t.Errorf("swap label %q", l)
				}
				if l := blkid(t, "LABEL", dev+"p2"); l != "ephemeral0" {
					t.Errorf("ephemeral label %q", l)
				}
				if got := readDev(t, dev+"p4", len(iso)); !bytes.Equal(got, iso) {
					t.Errorf("config drive partition does not hold the config drive")
				}
				if tbl.Partitions[3].Name != disk.ConfigDriveLabel {
					t.Errorf("config drive partition named %q", tbl.Partitions[3].Name)
				}
			case "bios msdos":
				if out := run(t, "sfdisk", "-d", dev); !strings.Contains(out, "bootable") {
					t.Errorf("root not marked bootable:\n%s", out)
				}
				if res.PartitionUUIDs.EFISystemPartUUID != "" {
					t.Errorf("ESP reported on a BIOS disk: %+v", res.PartitionUUIDs)
				}
			case "bios gpt":
				if tbl.Partitions[0].Type != disk.GPTTypeBIOSBoot || tbl.Partitions[0].Size != 1<<20 {
					t.Errorf("BIOS boot partition %+v", tbl.Partitions[0])
				}
			}
			// install_bootloader finds the root by the UUID reported.
			if c.mode == "bios" {
				n, err := partitionNode(dev, res.PartitionUUIDs.RootUUID)
				if err != nil || n != rootNode {
					t.Errorf("partitionNode(%s) = %s, %v; want %s", res.PartitionUUIDs.RootUUID, n, err, rootNode)
				}
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		dev := loopDevice(t, 64<<20)
		f, _ := os.OpenFile(dev, os.O_WRONLY, 0)
		f.Write(bytes.Repeat([]byte{0xAB}, 4096))
		f.Close()
		req := writeReq(base+"/root.img", sum, dev, nil)
		req.Info.ImageType, req.Info.RootMB = "partition", 100
		_, err := New(Options{ImageRetries: -1}).WriteImage(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "need") {
			t.Fatalf("err = %v", err)
		}
		if got := readDev(t, dev, 4096); !bytes.Equal(got, bytes.Repeat([]byte{0xAB}, 4096)) {
			t.Fatal("the disk was changed by a refused layout")
		}
	})
}

func readDev(t *testing.T, dev string, n int) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}
