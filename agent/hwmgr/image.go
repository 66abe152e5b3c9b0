package hwmgr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/image"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// ChecksumOf reads the checksum image_info gives: os_hash_algo plus
// os_hash_value, else checksum (a hex digest or a checksum file URL). md5 is
// refused unless the controller's lookup config allows it.
func ChecksumOf(info proto.ImageInfo, allowMD5 bool) (image.Checksum, error) {
	if info.OSHashAlgo != "" && info.OSHashValue != "" {
		return image.ParseChecksum(info.OSHashAlgo, info.OSHashValue, allowMD5)
	}
	if info.Checksum != "" {
		return image.ParseChecksum("", info.Checksum, allowMD5)
	}
	return image.Checksum{}, fmt.Errorf("image_info of %s has no checksum (os_hash_algo and os_hash_value, or checksum)", info.ID)
}

// WriteImage is the runtime's Deps.WriteImage (deploy step write_image and
// standby.prepare_image): the image onto the root device, then the GPT fixed
// and the partitions re-read, then the config drive.
func (m *Manager) WriteImage(ctx context.Context, req steps.ImageRequest) (steps.ImageResult, error) {
	info := req.Info
	log := req.Log
	if log == nil {
		log = m.log
	}
	if len(info.URLs) == 0 {
		return steps.ImageResult{}, fmt.Errorf("image_info of %s has no urls", info.ID)
	}
	allowMD5 := req.Lookup.AgentMD5ChecksumEnable
	sum, err := ChecksumOf(info, allowMD5)
	if err != nil {
		return steps.ImageResult{}, err
	}
	// The config drive is fetched and decoded before the disk is touched so
	// that a bad one fails the deploy with the disk as it was.
	cd, err := m.ConfigDrive(ctx, req.Configdrive)
	if err != nil {
		return steps.ImageResult{}, err
	}
	if req.Safety.InRamdisk && m.opts.Devices == nil {
		// An array an earlier clean built is the root device; its disks
		// may have shown up after the agent's start-up assembly ran.
		m.opts.RAID.Assemble(ctx)
	}
	dev, err := m.RootDevice(req.Node, info.RootDevice, req.Safety)
	if err != nil {
		return steps.ImageResult{}, err
	}
	if err := req.Safety.Check(dev.Name); err != nil {
		return steps.ImageResult{}, err
	}
	if info.ImageType == "partition" {
		return m.writePartitionImage(ctx, req, sum, cd, dev.Name, dev.Size)
	}
	report := func(p proto.CommandProgress) {
		if req.Progress != nil {
			req.Progress(p)
		}
	}
	ireq := image.Request{URL: info.URLs[0], Checksum: sum, AllowMD5: allowMD5, Target: dev.Name,
		Retries: m.opts.ImageRetries, RetryDelay: m.opts.ImageRetryDelay,
		Progress: func(done, total int64) {
			report(proto.CommandProgress{BytesDone: done, BytesTotal: max(total, 0), Stage: "write_image"})
		}}
	if u, err := url.Parse(info.URLs[0]); err == nil && info.Proxies != nil {
		ireq.Proxy = info.Proxies[u.Scheme]
	}
	log.Info("writing image", "url", info.URLs[0], "device", dev.Name, "checksum", sum.String())
	res, err := image.Write(ctx, ireq)
	if err != nil {
		// image.Write names the cause (checksum, truncated stream, qcow2
		// cluster) and whether it zeroed the ends of the disk.
		return steps.ImageResult{}, err
	}
	log.Info("image written", "device", dev.Name, "format", res.Format, "size", res.Size, "written", res.Written,
		"zeroed", res.Zeroed, "took", res.Duration)
	m.mu.Lock()
	m.written = writtenImage{Device: dev.Name}
	m.mu.Unlock()
	g := req.Safety
	report(proto.CommandProgress{BytesDone: res.Size, BytesTotal: res.Size, Stage: "partitions"})
	uuids, err := disk.AfterWriteImage(ctx, g, dev.Name)
	if err != nil {
		return steps.ImageResult{}, fmt.Errorf("after writing image %s to %s: %w", info.ID, dev.Name, err)
	}
	if cd != nil {
		report(proto.CommandProgress{BytesDone: res.Size, BytesTotal: res.Size, Stage: "configdrive"})
		p, err := disk.WriteConfigDrive(ctx, g, dev.Name, bytes.NewReader(cd), int64(len(cd)))
		if err != nil {
			return steps.ImageResult{}, fmt.Errorf("write the config drive to %s: %w", dev.Name, err)
		}
		log.Info("config drive written", "device", dev.Name, "partition", p.Number, "bytes", len(cd))
	}
	return steps.ImageResult{Device: dev.Name, PartitionUUIDs: proto.PartitionUUIDs{
		RootUUID: uuids.Root, EFISystemPartUUID: uuids.EFI}}, nil
}

// ConfigDrive returns the config drive image to write, nil for none. The
// param is a JSON string: a gzip+base64 ISO (or, as IPA tolerates, one that
// is not base64 or not gzipped), or an http(s) URL whose content is decoded
// the same way. The dict form is rendered to an ISO by the controller; an
// agent receiving one refuses it.
func (m *Manager) ConfigDrive(ctx context.Context, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if raw[0] == '{' {
			return nil, fmt.Errorf("the config drive is a JSON object: the controller must render it to an ISO (gzip+base64) first")
		}
		return nil, fmt.Errorf("decode the configdrive param: %w", err)
	}
	if s == "" {
		return nil, nil
	}
	data := []byte(s)
	if isHTTPURL(s) {
		b, err := m.fetch(ctx, s, maxEncodedConfigDrive)
		if err != nil {
			return nil, fmt.Errorf("download the config drive: %w", err)
		}
		data = b
	}
	iso, err := DecodeConfigDrive(data)
	if err != nil {
		return nil, err
	}
	return iso, nil
}
