package erase

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/internal/looptest"
	"github.com/kilnhq/kiln/internal/syspath"
)

const mib = 1 << 20

// signature is one thing put on a partition, and the TYPE blkid must
// report for it before the erase.
type signature struct {
	size  int64 // partition size
	typ   string
	make  func(t *testing.T, dev string)
	tools []string
}

func mkfs(tool string, args ...string) func(*testing.T, string) {
	return func(t *testing.T, dev string) {
		looptest.Run(t, tool, append(args, dev)...)
	}
}

var lvmConfig = "devices { obtain_device_list_from_udev=0 use_devicesfile=0 }"

func signatures(t *testing.T) []signature {
	sigs := []signature{
		{32 * mib, "vfat", mkfs("mkfs.vfat", "-F", "32"), []string{"mkfs.vfat"}},
		{64 * mib, "ext4", mkfs("mkfs.ext4", "-q", "-F"), []string{"mkfs.ext4"}},
		{16 * mib, "swap", mkfs("mkswap"), []string{"mkswap"}},
		{32 * mib, "LVM2_member", mkfs("pvcreate", "-ff", "-y", "--config", lvmConfig), []string{"pvcreate"}},
		{16 * mib, "linux_raid_member", mdSuperblock("1.2"), []string{"mdadm"}},
		{16 * mib, "linux_raid_member", mdSuperblock("1.1"), []string{"mdadm"}},
		{16 * mib, "linux_raid_member", mdSuperblock("1.0"), []string{"mdadm"}},
		{16 * mib, "linux_raid_member", mdSuperblock("0.90"), []string{"mdadm"}},
		{8 * mib, "iso9660", isoImage, []string{"genisoimage"}},
	}
	// XFS and btrfs are checked where their tools are installed (CI
	// installs xfsprogs and btrfs-progs).
	if _, err := syspath.LookPath("mkfs.xfs"); err == nil {
		sigs = append(sigs, signature{320 * mib, "xfs", mkfs("mkfs.xfs", "-q", "-f"), nil})
	} else {
		t.Logf("mkfs.xfs not installed: XFS not covered")
	}
	if _, err := syspath.LookPath("mkfs.btrfs"); err == nil {
		sigs = append(sigs, signature{128 * mib, "btrfs", mkfs("mkfs.btrfs", "-q", "-f"), nil})
	} else {
		t.Logf("mkfs.btrfs not installed: btrfs not covered")
	}
	return sigs
}

// mdSuperblock puts an md RAID member superblock of the given version on
// dev: with mdadm --create where the kernel has md, else by writing the
// superblock mdadm would write (this CI kernel has no md driver);
// mdadm --examine confirms it either way.
func mdSuperblock(version string) func(*testing.T, string) {
	return func(t *testing.T, dev string) {
		if _, err := os.Stat("/proc/mdstat"); err == nil {
			md := "/dev/md/kiln-erase-test"
			looptest.Run(t, "mdadm", "--create", md, "--run", "--force", "--level=1", "--raid-devices=2", "--metadata="+version, dev, "missing")
			looptest.Run(t, "mdadm", "--stop", md)
		} else {
			writeMDSuperblock(t, dev, version)
		}
		out := looptest.Run(t, "mdadm", "--examine", dev)
		if !strings.Contains(out, "a92b4efc") {
			t.Fatalf("mdadm --examine %s:\n%s", dev, out)
		}
	}
}

func writeMDSuperblock(t *testing.T, dev, version string) {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Seek(0, 2)
	le := binary.LittleEndian
	var sb []byte
	var off int64
	if version == "0.90" {
		sb = make([]byte, 4096)
		le.PutUint32(sb[0:], 0xa92b4efc)
		le.PutUint32(sb[8:], 90)
		le.PutUint32(sb[20:], 0x6b696c6e) // set_uuid0
		le.PutUint32(sb[28:], 1)          // raid1
		off = (size &^ (64<<10 - 1)) - 64<<10
		le.PutUint32(sb[32:], uint32(off>>10)) // data size in KiB: up to the superblock
		le.PutUint32(sb[36:], 2)
		le.PutUint32(sb[40:], 2)
	} else {
		switch version {
		case "1.0":
			off = ((size>>9 - 16) &^ 7) << 9
		case "1.1":
			off = 0
		case "1.2":
			off = 4096
		}
		sb = make([]byte, 1024)
		le.PutUint32(sb[0:], 0xa92b4efc)
		le.PutUint32(sb[4:], 1)
		copy(sb[16:32], "kiln-set-uuid-01")
		copy(sb[32:64], "kiln:erase-test")
		le.PutUint32(sb[72:], 1)
		le.PutUint64(sb[80:], uint64(size>>9)-4096)
		le.PutUint32(sb[92:], 2)
		le.PutUint64(sb[128:], 2048)
		le.PutUint64(sb[136:], uint64(size>>9)-4096)
		le.PutUint64(sb[144:], uint64(off>>9))
		copy(sb[168:184], "kiln-dev-uuid-01")
		le.PutUint64(sb[200:], 1)
		le.PutUint32(sb[220:], 2) // max_dev
		le.PutUint16(sb[258:], 1)
		var sum uint64
		for i := 0; i < 256+2*2; i += 4 {
			sum += uint64(le.Uint32(sb[i:]))
		}
		le.PutUint32(sb[216:], uint32(sum&0xffffffff+sum>>32))
	}
	if _, err := f.WriteAt(sb, off); err != nil {
		t.Fatal(err)
	}
}

func isoImage(t *testing.T, dev string) {
	dir := t.TempDir()
	os.WriteFile(dir+"/hello", []byte("hi"), 0o644)
	iso := t.TempDir() + "/x.iso"
	looptest.Run(t, "genisoimage", "-quiet", "-V", "config-2", "-o", iso, dir)
	b, _ := os.ReadFile(iso)
	if err := os.WriteFile(dev, b, 0); err != nil {
		t.Fatal(err)
	}
}

// found lists what the oracles see on dev: wipefs -n rows and blkid -p.
func found(dev string) string {
	w := strings.TrimSpace(looptest.Output("wipefs", "-n", dev))
	b := strings.TrimSpace(looptest.Output("blkid", "-p", dev))
	return strings.TrimSpace(w + "\n" + b)
}

func newEraser(dev string) *Eraser {
	return &Eraser{Guard: disk.Guard{Allow: []string{dev}}, Log: slog.New(slog.DiscardHandler)}
}

// TestMetadataEraseOnLoop puts every signature kind on partitions of a GPT
// disk, erases metadata, and checks that wipefs and blkid find nothing on
// the disk or in any former partition.
func TestMetadataEraseOnLoop(t *testing.T) {
	looptest.Need(t, "sgdisk", "wipefs", "blkid")
	sigs := signatures(t)
	var total int64 = 4 * mib
	args := []string{}
	for i, s := range sigs {
		looptest.Need(t, s.tools...)
		total += s.size
		args = append(args, fmt.Sprintf("-n%d:0:+%dM", i+1, s.size/mib))
	}
	img := looptest.Image(t, total)
	dev := looptest.Attach(t, img)
	looptest.Run(t, "sgdisk", append(args, dev)...)
	if err := disk.RereadPartitions(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	table, err := disk.ReadTable(dev)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sigs {
		p := fmt.Sprintf("%sp%d", dev, i+1)
		s.make(t, p)
		if out := found(p); !strings.Contains(out, `TYPE="`+s.typ+`"`) {
			t.Fatalf("precondition: blkid does not see %s on %s:\n%s", s.typ, p, out)
		}
	}
	if out := found(dev); !strings.Contains(out, "gpt") || !strings.Contains(out, "PMBR") {
		t.Fatalf("precondition: no GPT/PMBR on %s:\n%s", dev, out)
	}

	res, err := newEraser(dev).Metadata(t.Context(), dev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != MetadataOnly || res.Checked == 0 {
		t.Errorf("result %+v", res)
	}
	if out := found(dev); out != "" {
		t.Errorf("after the erase the oracles still find on %s:\n%s", dev, out)
	}
	if ps, _ := disk.KernelPartitions(dev); len(ps) != 0 {
		t.Errorf("kernel still has partitions %v", ps)
	}
	for i, p := range table.Partitions {
		r := looptest.AttachRange(t, img, p.Start, p.Size)
		if out := found(r); out != "" {
			t.Errorf("former partition %d (%s) still shows:\n%s", p.Number, sigs[i].typ, out)
		}
	}
}

// TestMetadataEraseWholeDiskSignatures covers signatures on the disk
// itself: an MBR, a filesystem and md superblocks at the device's end.
func TestMetadataEraseWholeDiskSignatures(t *testing.T) {
	looptest.Need(t, "sfdisk", "wipefs", "blkid", "mkfs.ext4", "mdadm")
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dev string)
		typ   string
	}{
		{"mbr", func(t *testing.T, dev string) {
			cmd := exec.Command("sfdisk", "-q", dev)
			cmd.Stdin = strings.NewReader("label: dos\n,16M,83\n,,ef\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sfdisk: %v %s", err, out)
			}
		}, "dos"},
		{"ext4 on the whole disk", mkfs("mkfs.ext4", "-q", "-F"), "ext4"},
		{"md 0.90 on the whole disk", mdSuperblock("0.90"), "linux_raid_member"},
		{"md 1.0 on the whole disk", mdSuperblock("1.0"), "linux_raid_member"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// An odd size: end-of-device offsets must not assume round numbers.
			dev := looptest.Attach(t, looptest.Image(t, 48*mib+7*4096))
			c.setup(t, dev)
			if out := found(dev); !strings.Contains(out, `"`+c.typ+`"`) && !strings.Contains(out, " "+c.typ) {
				t.Fatalf("precondition: %s not found:\n%s", c.typ, out)
			}
			if _, err := newEraser(dev).Metadata(t.Context(), dev); err != nil {
				t.Fatal(err)
			}
			if out := found(dev); out != "" {
				t.Errorf("still found:\n%s", out)
			}
		})
	}
}

func TestFullEraseOnLoop(t *testing.T) {
	img := looptest.Image(t, 24*mib)
	f, _ := os.OpenFile(img, os.O_RDWR, 0)
	junk := make([]byte, mib)
	for i := range junk {
		junk[i] = byte(i*7 + 1)
	}
	for off := int64(0); off < 24*mib; off += mib {
		f.WriteAt(junk, off)
	}
	f.Close()
	dev := looptest.Attach(t, img)
	res, err := newEraser(dev).Full(t.Context(), dev)
	if err != nil {
		t.Fatal(err)
	}
	// A loop device has no secure erase and no zeroing discard.
	if res.Method != ZeroOverwrite {
		t.Errorf("method %s (%s), want %s", res.Method, res.Reason, ZeroOverwrite)
	}
	b, _ := os.ReadFile(img)
	if i := firstNonZero(b); i >= 0 {
		t.Errorf("byte %d of the backing file is not zero", i)
	}

	res, err = newEraser(dev).Express(t.Context(), dev)
	if err != nil || res.Method != MetadataOnly {
		t.Errorf("express: %+v, %v", res, err)
	}
	if _, err := newEraser("/dev/loop-other").Full(t.Context(), dev); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("guard: %v", err)
	}
}

func TestLinuxDiskDiscardOnLoop(t *testing.T) {
	img := looptest.Image(t, 8*mib)
	os.WriteFile(img, bytes.Repeat([]byte{0xaa}, 8*mib), 0o644)
	dev := looptest.Attach(t, img)
	d, err := Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.CanDiscard() {
		t.Skip("this kernel's loop driver does not discard")
	}
	if d.NVMe() != nil || d.ATA() != nil || d.SectorSize() != 512 || d.Size() != 8*mib {
		t.Errorf("loop device: nvme %v ata %v sector %d size %d", d.NVMe(), d.ATA(), d.SectorSize(), d.Size())
	}
	if err := d.Discard(t.Context(), mib, 2*mib); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4*mib)
	if _, err := d.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if b[mib-1] != 0xaa || firstNonZero(b[mib:3*mib]) >= 0 || b[3*mib] != 0xaa {
		t.Errorf("discard of [1 MiB, 3 MiB) did not zero exactly that range")
	}
}
