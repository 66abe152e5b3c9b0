package disk

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk/internal/looptest"
)

const mib = 1 << 20

// wholeDiskImage makes a GPT image of imgSize bytes (ESP + root, as a
// cloud image has) and returns the image file grown to diskSize: what a
// whole-disk image written to a larger disk looks like.
func wholeDiskImage(t *testing.T, imgSize, diskSize int64) string {
	t.Helper()
	looptest.Need(t, "sgdisk")
	img := looptest.Image(t, imgSize)
	looptest.Run(t, "sgdisk", "-n1:0:+4M", "-t1:ef00", "-c1:EFI-SYSTEM", "-n2:0:0", "-t2:8300", "-c2:root", img)
	if err := os.Truncate(img, diskSize); err != nil {
		t.Fatal(err)
	}
	return img
}

func sgdiskVerify(t *testing.T, dev string) string {
	t.Helper()
	return looptest.Output("sgdisk", "-v", dev)
}

func guard(dev string) Guard { return Guard{Allow: []string{dev}} }

func TestFixBackupGPTOnLoop(t *testing.T) {
	img := wholeDiskImage(t, 24*mib, 64*mib)
	dev := looptest.Attach(t, img)
	if out := sgdiskVerify(t, dev); strings.Contains(out, "No problems found") {
		t.Fatalf("precondition: sgdisk finds no problem with a misplaced backup GPT:\n%s", out)
	}
	ctx := context.Background()
	if _, err := FixBackupGPT(ctx, Guard{}, dev); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("unguarded FixBackupGPT: err = %v", err)
	}
	changed, err := FixBackupGPT(ctx, guard(dev), dev)
	if err != nil || !changed {
		t.Fatalf("FixBackupGPT = %v, %v", changed, err)
	}
	if out := sgdiskVerify(t, dev); !strings.Contains(out, "No problems found") {
		t.Fatalf("sgdisk -v after fix:\n%s", out)
	}
	// The last usable sector moved to the new end (sgdisk -p "last usable sector is N").
	out := looptest.Run(t, "sgdisk", "-p", dev)
	if want := "last usable sector is 131038"; !strings.Contains(out, want) {
		t.Errorf("sgdisk -p lacks %q:\n%s", want, out)
	}
	changed, err = FixBackupGPT(ctx, guard(dev), dev)
	if err != nil || changed {
		t.Fatalf("second FixBackupGPT = %v, %v; want a no-op", changed, err)
	}
	if err := RereadPartitions(ctx, dev); err != nil {
		t.Fatal(err)
	}

	// PartitionUUIDs agrees with the oracle (sgdisk's unique GUIDs).
	u, err := PartitionUUIDs(dev)
	if err != nil {
		t.Fatal(err)
	}
	if u.RootNumber != 2 || u.EFINumber != 1 {
		t.Errorf("root/EFI = %d/%d, want 2/1", u.RootNumber, u.EFINumber)
	}
	for n, got := range map[string]string{"1": u.EFI, "2": u.Root} {
		info := looptest.Run(t, "sgdisk", "-i", n, dev)
		m := regexp.MustCompile(`Partition unique GUID: (\S+)`).FindStringSubmatch(info)
		if m == nil || !strings.EqualFold(m[1], got) {
			t.Errorf("partition %s: PartitionUUIDs says %s, sgdisk -i:\n%s", n, got, info)
		}
	}
	disk := regexp.MustCompile(`Disk identifier \(GUID\): (\S+)`).FindStringSubmatch(out)
	if disk == nil || !strings.EqualFold(disk[1], u.DiskID) {
		t.Errorf("disk id %s, sgdisk -p:\n%s", u.DiskID, out)
	}
}

func TestFixBackupGPTRebuildsDamagedPrimary(t *testing.T) {
	img := wholeDiskImage(t, 16*mib, 16*mib)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xff}, 512), 512) // smash the primary header
	f.Close()
	before, err := ReadTable(img)
	if err != nil {
		t.Fatalf("backup not used: %v", err)
	}
	changed, err := FixBackupGPT(context.Background(), guard(img), img)
	if err != nil || !changed {
		t.Fatalf("FixBackupGPT = %v, %v", changed, err)
	}
	if out := sgdiskVerify(t, img); !strings.Contains(out, "No problems found") {
		t.Fatalf("sgdisk -v after fix:\n%s", out)
	}
	after, err := ReadTable(img)
	if err != nil || len(after.Partitions) != 2 || after.Partitions[1] != before.Partitions[1] {
		t.Fatalf("table changed: %+v -> %+v (%v)", before, after, err)
	}
}

func TestFixBackupGPTImageLargerThanDisk(t *testing.T) {
	img := wholeDiskImage(t, 32*mib, 32*mib)
	os.Truncate(img, 20*mib) // the disk is smaller than the image
	_, err := FixBackupGPT(context.Background(), guard(img), img)
	if err == nil || !strings.Contains(err.Error(), "larger than the disk") {
		t.Fatalf("err = %v", err)
	}
}

func TestFixBackupGPTLeavesMBRAlone(t *testing.T) {
	looptest.Need(t, "sfdisk")
	img := looptest.Image(t, 16*mib)
	sfdisk(t, img, "label: dos\n,4M,ef\n,,83\n")
	changed, err := FixBackupGPT(context.Background(), guard(img), img)
	if err != nil || changed {
		t.Fatalf("FixBackupGPT on MBR = %v, %v", changed, err)
	}
	u, err := PartitionUUIDs(img)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(looptest.Output("blkid", "-p", "-o", "value", "-s", "PTUUID", img))
	if u.DiskID != id || u.Root != id+"-02" || u.EFI != id+"-01" {
		t.Errorf("UUIDs %+v, blkid PTUUID %s", u, id)
	}
}

func sfdisk(t *testing.T, img, script string) {
	t.Helper()
	cmd := exec.Command("sfdisk", "-q", img)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
}

func TestPartitionUUIDsChoosesRoot(t *testing.T) {
	looptest.Need(t, "sgdisk")
	img := looptest.Image(t, 64*mib)
	// A discoverable root type wins over a larger data partition.
	looptest.Run(t, "sgdisk", "-n1:0:+1M", "-t1:ef02", "-n2:0:+8M", "-t2:8304", "-n3:0:+20M", "-t3:8300", "-n4:0:+4M", "-t4:8200", img)
	u, err := PartitionUUIDs(img)
	if err != nil || u.RootNumber != 2 || u.EFI != "" {
		t.Fatalf("typed root: %+v, %v", u, err)
	}
	img2 := looptest.Image(t, 64*mib)
	looptest.Run(t, "sgdisk", "-n1:0:+1M", "-t1:ef02", "-n2:0:+8M", "-t2:8300", "-n3:0:+20M", "-t3:0700", "-n4:0:+30M", "-t4:8200", img2)
	if u, err = PartitionUUIDs(img2); err != nil || u.RootNumber != 3 {
		t.Fatalf("largest data partition: %+v, %v", u, err)
	}
	img3 := looptest.Image(t, 8*mib)
	looptest.Run(t, "sgdisk", "-n1:0:+1M", "-t1:ef00", img3)
	// An ESP-only whole-disk image (a UKI) has no root: not an error.
	if u, err = PartitionUUIDs(img3); err != nil || u.Root != "" || u.EFINumber != 1 {
		t.Fatalf("ESP only: %+v, %v", u, err)
	}
	if _, err = PartitionUUIDs(looptest.Image(t, mib)); err == nil || !strings.Contains(err.Error(), "no partition table") {
		t.Fatalf("blank disk: %v", err)
	}
}

// configISO builds a small config-2 ISO like the controller sends.
func configISO(t *testing.T) []byte {
	t.Helper()
	looptest.Need(t, "genisoimage")
	dir := t.TempDir()
	os.MkdirAll(dir+"/root/openstack/latest", 0o755)
	os.WriteFile(dir+"/root/openstack/latest/meta_data.json", []byte(`{"uuid":"4a7c1f5e-0000-4000-8000-000000000001"}`), 0o644)
	looptest.Run(t, "genisoimage", "-quiet", "-R", "-J", "-V", "config-2", "-o", dir+"/cd.iso", dir+"/root")
	b, err := os.ReadFile(dir + "/cd.iso")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func blkidPart(t *testing.T, dev string, n int) string {
	t.Helper()
	p := dev + "p" + string(rune('0'+n))
	looptest.Settle()
	return looptest.Output("blkid", "-p", "-o", "export", p)
}

func TestWriteConfigDriveGPT(t *testing.T) {
	iso := configISO(t)
	img := wholeDiskImage(t, 24*mib, 200*mib)
	dev := looptest.Attach(t, img)
	p, err := WriteConfigDrive(context.Background(), guard(dev), dev, bytes.NewReader(iso), int64(len(iso)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Number != 3 || p.Name != "config-2" || p.Size > MaxConfigDriveSize || p.Start+p.Size < 198*mib {
		t.Fatalf("partition %+v: want #3 named config-2, ≤64 MiB, at the end", p)
	}
	if out := sgdiskVerify(t, dev); !strings.Contains(out, "No problems found") {
		t.Fatalf("sgdisk -v:\n%s", out)
	}
	out := blkidPart(t, dev, 3)
	for _, want := range []string{"LABEL=config-2", "TYPE=iso9660", "PART_ENTRY_NAME=config-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("blkid of the new partition lacks %s:\n%s", want, out)
		}
	}
	// A second write goes into the same partition.
	p2, err := WriteConfigDrive(context.Background(), guard(dev), dev, bytes.NewReader(iso), int64(len(iso)))
	if err != nil || p2 != p {
		t.Fatalf("rewrite: %+v, %v; want %+v", p2, err, p)
	}
}

func TestWriteConfigDriveMBR(t *testing.T) {
	looptest.Need(t, "sfdisk")
	iso := configISO(t)
	img := looptest.Image(t, 128*mib)
	sfdisk(t, img, "label: dos\n,8M,ef\n,32M,83\n")
	dev := looptest.Attach(t, img)
	p, err := WriteConfigDrive(context.Background(), guard(dev), dev, bytes.NewReader(iso), int64(len(iso)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Number != 3 || p.Start+p.Size < 127*mib || p.Size != MaxConfigDriveSize {
		t.Fatalf("partition %+v", p)
	}
	out := looptest.Run(t, "sfdisk", "-d", dev)
	if !strings.Contains(out, "type=83") || strings.Count(out, "start=") != 3 {
		t.Errorf("sfdisk -d:\n%s", out)
	}
	if out := blkidPart(t, dev, 3); !strings.Contains(out, "LABEL=config-2") || !strings.Contains(out, "TYPE=iso9660") {
		t.Errorf("blkid:\n%s", out)
	}
}

func TestWriteConfigDriveExistingPartition(t *testing.T) {
	looptest.Need(t, "sgdisk", "mkfs.vfat")
	iso := configISO(t)
	img := looptest.Image(t, 64*mib)
	looptest.Run(t, "sgdisk", "-n1:0:+20M", "-n2:0:+8M", "-c2:config-2", img)
	p, err := WriteConfigDrive(context.Background(), guard(img), img, bytes.NewReader(iso), int64(len(iso)))
	if err != nil || p.Number != 2 {
		t.Fatalf("named partition: %+v, %v", p, err)
	}
	// An MBR image whose config drive is a FAT filesystem labelled config-2.
	img2 := looptest.Image(t, 64*mib)
	sfdisk(t, img2, "label: dos\n,20M,83\n,8M,0c\n")
	dev := looptest.Attach(t, img2)
	looptest.Run(t, "mkfs.vfat", "-n", "CONFIG-2", dev+"p2")
	p, err = WriteConfigDrive(context.Background(), guard(dev), dev, bytes.NewReader(iso), int64(len(iso)))
	if err != nil || p.Number != 2 {
		t.Fatalf("labelled partition: %+v, %v", p, err)
	}
	if out := blkidPart(t, dev, 2); !strings.Contains(out, "TYPE=iso9660") {
		t.Errorf("blkid:\n%s", out)
	}
}

func TestWriteConfigDriveErrors(t *testing.T) {
	ctx := context.Background()
	img := wholeDiskImage(t, 24*mib, 24*mib)
	if _, err := WriteConfigDrive(ctx, guard(img), img, strings.NewReader("x"), 1); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("small disk: %v", err)
	}
	full := wholeDiskImage(t, 200*mib, 200*mib) // root fills the disk
	if _, err := WriteConfigDrive(ctx, guard(full), full, strings.NewReader("x"), 1); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Errorf("full disk: %v", err)
	}
	if _, err := WriteConfigDrive(ctx, guard(img), img, strings.NewReader(""), MaxConfigDriveSize+1); err == nil || !strings.Contains(err.Error(), "bytes, want 1 to") {
		t.Errorf("oversized: %v", err)
	}
	if _, err := WriteConfigDrive(ctx, Guard{}, img, strings.NewReader("x"), 1); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("guard: %v", err)
	}
	big := wholeDiskImage(t, 24*mib, 200*mib)
	if _, err := WriteConfigDrive(ctx, guard(big), big, strings.NewReader("short"), 4096); err == nil || !strings.Contains(err.Error(), "ended after 5") {
		t.Errorf("short reader: %v", err)
	}
}

func TestRereadPartitions(t *testing.T) {
	looptest.Need(t, "sgdisk")
	dev := looptest.Attach(t, looptest.Image(t, 32*mib))
	sys := "/sys/class/block/" + strings.TrimPrefix(dev, "/dev/")
	part := func(n int) bool {
		_, err := os.Stat(sys + "/" + strings.TrimPrefix(dev, "/dev/") + "p" + string(rune('0'+n)))
		return err == nil
	}
	looptest.Run(t, "sgdisk", "-n1:0:+4M", "-n2:0:+4M", dev)
	if err := RereadPartitions(context.Background(), dev); err != nil {
		t.Fatal(err)
	}
	if !part(1) || !part(2) {
		t.Fatalf("partitions 1 and 2 missing after re-read")
	}
	// Partition 2 grows and 1 goes away: the kernel must follow.
	looptest.Run(t, "sgdisk", "-d1", "-d2", "-n2:0:+8M", dev)
	if err := RereadPartitions(context.Background(), dev); err != nil {
		t.Fatal(err)
	}
	if part(1) || !part(2) || readString(sys+"/"+strings.TrimPrefix(dev, "/dev/")+"p2/size") != "16384" {
		t.Fatalf("kernel partitions not updated: p1 %v, p2 %v", part(1), part(2))
	}
	looptest.Run(t, "sgdisk", "-Z", dev)
	if err := RereadPartitions(context.Background(), dev); err != nil {
		t.Fatal(err)
	}
	if part(2) {
		t.Fatal("partition 2 still present after the table was zapped")
	}
}

// TestFixBackupGPT4KSectors grows a 4Kn disk from 16 to 100 MiB under its GPT (the loop
// device's backing file is enlarged and the capacity re-read), as when an
// image is written to a larger 4Kn drive.
func TestFixBackupGPT4KSectors(t *testing.T) {
	looptest.Need(t, "sgdisk")
	img := looptest.Image(t, 16*mib)
	dev := looptest.Attach(t, img, "--sector-size", "4096")
	looptest.Run(t, "sgdisk", "-n1:0:+4M", "-t1:ef00", "-n2:0:0", dev)
	if err := os.Truncate(img, 100*mib); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "losetup", "--set-capacity", dev)
	if out := sgdiskVerify(t, dev); strings.Contains(out, "No problems found") {
		t.Fatalf("precondition: no problem found after growing:\n%s", out)
	}
	if changed, err := FixBackupGPT(context.Background(), guard(dev), dev); err != nil || !changed {
		t.Fatalf("FixBackupGPT = %v, %v", changed, err)
	}
	if out := sgdiskVerify(t, dev); !strings.Contains(out, "No problems found") {
		t.Fatalf("sgdisk -v after fix:\n%s", out)
	}
	tb, err := ReadTable(dev)
	if err != nil || tb.SectorSize != 4096 || len(tb.Partitions) != 2 || tb.Partitions[0].Start != mib {
		t.Fatalf("table %+v, %v", tb, err)
	}
	iso := configISO(t)
	p, err := WriteConfigDrive(context.Background(), guard(dev), dev, bytes.NewReader(iso), int64(len(iso)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Number != 3 || p.Start%4096 != 0 || p.Start+p.Size > 100*mib {
		t.Errorf("config drive partition %+v", p)
	}
	if out := sgdiskVerify(t, dev); !strings.Contains(out, "No problems found") {
		t.Fatalf("sgdisk -v after config drive:\n%s", out)
	}
}

func TestAfterWriteImage(t *testing.T) {
	img := wholeDiskImage(t, 24*mib, 96*mib)
	dev := looptest.Attach(t, img)
	u, err := AfterWriteImage(context.Background(), guard(dev), dev)
	if err != nil {
		t.Fatal(err)
	}
	if u.RootNumber != 2 || u.EFINumber != 1 || u.Root == "" || u.EFI == "" {
		t.Errorf("UUIDs %+v", u)
	}
	if out := sgdiskVerify(t, dev); !strings.Contains(out, "No problems found") {
		t.Errorf("sgdisk -v:\n%s", out)
	}
	kp, err := KernelPartitions(dev)
	if err != nil || len(kp) != 2 {
		t.Errorf("kernel partitions %v, %v", kp, err)
	}
	out := looptest.Output("blkid", "-p", "-o", "export", dev+"p2")
	if !strings.Contains(strings.ToLower(out), "part_entry_uuid="+u.Root) {
		t.Errorf("blkid of root partition does not show PART_ENTRY_UUID=%s:\n%s", u.Root, out)
	}
	blank := looptest.Attach(t, looptest.Image(t, 8*mib))
	if _, err := AfterWriteImage(context.Background(), guard(blank), blank); err == nil || !strings.Contains(err.Error(), "no partition table") {
		t.Errorf("image without partitions: %v", err)
	}
}
