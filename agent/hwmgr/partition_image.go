package hwmgr

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/erase"
	"github.com/kilnhq/kiln/agent/image"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// espLabel is the FAT label IPA gives the ESP it makes.
const espLabel = "efi-part"

// writePartitionImage deploys image_type partition as IPA's work_on_disk:
// the disk's metadata erased, a new table (LayoutFor: ESP or BIOS boot
// partition for local boot, ephemeral, swap, config drive, root last), the
// image streamed into the root partition by the same pipeline as a whole
// disk, swap and ephemeral formatted, the ESP formatted FAT32, the config
// drive written into its partition. It reports the root filesystem's UUID
// (else its PARTUUID) and the ESP's PARTUUID, and remembers the disk for
// install_bootloader, which installs the image's boot loader.
func (m *Manager) writePartitionImage(ctx context.Context, req steps.ImageRequest, sum image.Checksum, cd []byte, dev string, devSize int64) (steps.ImageResult, error) {
	info := req.Info
	log := req.Log
	if log == nil {
		log = m.log
	}
	if info.PreserveEphemeral {
		return steps.ImageResult{}, fmt.Errorf("preserve_ephemeral is not supported by kiln-agent: the disk would be repartitioned")
	}
	if info.RootMB <= 0 {
		return steps.ImageResult{}, fmt.Errorf("image_info of %s: a partition image needs root_mb", info.ID)
	}
	var cdMB int64
	if cd != nil {
		cdMB = disk.MaxConfigDriveSize >> 20
	}
	l, err := disk.LayoutFor(info.DeployBootMode, info.BootOption, info.DiskLabel, int64(info.RootMB), int64(info.SwapMB), int64(info.EphemeralMB), cdMB)
	if err != nil {
		return steps.ImageResult{}, fmt.Errorf("image_info of %s: %w", info.ID, err)
	}
	mkfsEph := ""
	if l.EphemeralMB > 0 {
		f := info.EphemeralFormat
		if f == "" {
			f = "ext4"
		}
		if strings.ContainsAny(f, "/ ") {
			return steps.ImageResult{}, fmt.Errorf("ephemeral_format %q is not a filesystem type", f)
		}
		if mkfsEph, err = exec.LookPath("mkfs." + f); err != nil {
			return steps.ImageResult{}, fmt.Errorf("ephemeral_format %s: mkfs.%s is not in this ramdisk: %w", f, f, err)
		}
	}
	// Refuse a layout that cannot fit before anything is erased.
	if need := (l.ESPMB + l.BIOSBootMB + l.EphemeralMB + l.SwapMB + l.ConfigDriveMB + l.RootMB + 2) << 20; need > devSize {
		return steps.ImageResult{}, fmt.Errorf("image_info of %s: the partitions need %d MiB but %s holds %d MiB", info.ID, need>>20, dev, devSize>>20)
	}
	g := req.Safety
	if _, err := (&erase.Eraser{Guard: g, Log: log}).Metadata(ctx, dev); err != nil {
		return steps.ImageResult{}, fmt.Errorf("partition image: %w", err)
	}
	made, err := disk.MakePartitions(ctx, g, dev, l)
	if err != nil {
		return steps.ImageResult{}, err
	}
	m.mu.Lock()
	m.written = writtenImage{Device: dev, Partition: true}
	m.mu.Unlock()
	node := func(p disk.Partition) (string, error) {
		kparts, err := disk.KernelPartitions(dev)
		if err != nil {
			return "", err
		}
		for _, k := range kparts {
			if k.Number == p.Number {
				return "/dev/" + k.Name, nil
			}
		}
		return "", fmt.Errorf("the kernel has no partition %d of %s", p.Number, dev)
	}
	rootNode, err := node(made.Root)
	if err != nil {
		return steps.ImageResult{}, err
	}
	report := func(p proto.CommandProgress) {
		if req.Progress != nil {
			req.Progress(p)
		}
	}
	ireq := image.Request{URL: info.URLs[0], Checksum: sum, AllowMD5: req.Lookup.AgentMD5ChecksumEnable, Target: rootNode,
		Retries: m.opts.ImageRetries, RetryDelay: m.opts.ImageRetryDelay,
		Progress: func(done, total int64) {
			report(proto.CommandProgress{BytesDone: done, BytesTotal: max(total, 0), Stage: "write_image"})
		}}
	if u, err := url.Parse(info.URLs[0]); err == nil && info.Proxies != nil {
		ireq.Proxy = info.Proxies[u.Scheme]
	}
	log.Info("writing partition image", "url", info.URLs[0], "device", dev, "root", rootNode, "layout", fmt.Sprintf("%+v", l))
	res, err := image.Write(ctx, ireq)
	if err != nil {
		return steps.ImageResult{}, err
	}
	log.Info("image written", "partition", rootNode, "format", res.Format, "size", res.Size, "took", res.Duration)
	if made.Swap.Number != 0 {
		n, err := node(made.Swap)
		if err == nil {
			// A partition of the disk the guard already let through.
			pg := g
			pg.Allow = append(append([]string(nil), g.Allow...), n)
			err = disk.MakeSwap(pg, n, "swap1")
		}
		if err != nil {
			return steps.ImageResult{}, fmt.Errorf("partition image: swap: %w", err)
		}
	}
	if made.Ephemeral.Number != 0 {
		n, err := node(made.Ephemeral)
		if err != nil {
			return steps.ImageResult{}, err
		}
		args := []string{"-L", "ephemeral0", n}
		if strings.HasSuffix(mkfsEph, "mkfs.ext4") || strings.HasSuffix(mkfsEph, "mkfs.ext3") || strings.HasSuffix(mkfsEph, "mkfs.xfs") {
			args = append([]string{"-F"}, args...)
			if strings.HasSuffix(mkfsEph, "mkfs.xfs") {
				args[0] = "-f"
			}
		}
		if out, err := exec.CommandContext(ctx, mkfsEph, args...).CombinedOutput(); err != nil {
			return steps.ImageResult{}, fmt.Errorf("partition image: format the ephemeral partition: %s: %w: %s", mkfsEph, err, bytes.TrimSpace(out))
		}
	}
	if made.ESP.Number != 0 {
		n, err := node(made.ESP)
		if err == nil {
			err = formatESP(n, made.ESP.Size)
		}
		if err != nil {
			return steps.ImageResult{}, fmt.Errorf("partition image: ESP: %w", err)
		}
	}
	if cd != nil {
		n, err := node(made.ConfigDrive)
		if err == nil {
			err = writeWhole(n, cd)
		}
		if err != nil {
			return steps.ImageResult{}, fmt.Errorf("partition image: config drive: %w", err)
		}
		log.Info("config drive written", "partition", n, "bytes", len(cd))
	}
	rootUUID := made.Root.UUID
	if f, err := os.Open(rootNode); err == nil {
		if u, ok := disk.FilesystemUUID(f); ok {
			rootUUID = u
		}
		f.Close()
	}
	return steps.ImageResult{Device: dev, PartitionUUIDs: proto.PartitionUUIDs{RootUUID: rootUUID, EFISystemPartUUID: made.ESP.UUID}}, nil
}

// formatESP makes a FAT32 filesystem on the ESP partition node.
func formatESP(dev string, size int64) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := fat32.Create(file.New(f, false), size, 0, 512, espLabel, false); err != nil {
		return fmt.Errorf("format %s FAT32: %w", dev, err)
	}
	return f.Sync()
}

// writeWhole writes b at the start of dev.
func writeWhole(dev string, b []byte) error {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, bytes.NewReader(b)); err != nil {
		return err
	}
	return f.Sync()
}
