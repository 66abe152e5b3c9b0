// Package configdrive renders an OpenStack config drive (the ISO9660 volume
// labelled config-2 that cloud-init and Ignition read) from the dict form
// clients may send with a deploy request, in the gzip+base64 form the agent's
// write_image step expects.
package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// Label is the volume label config-drive readers look for.
const Label = "config-2"

// MaxSize bounds the ISO: the agent writes it to a partition of 64 MiB at most.
const MaxSize = 64 << 20

// Drive is the dict form of a config drive (Ironic API ≥ 1.56).
type Drive struct {
	MetaData    map[string]any `json:"meta_data,omitempty"`
	NetworkData map[string]any `json:"network_data,omitempty"`
	UserData    any            `json:"user_data,omitempty"` // a string, or JSON (Ignition) as an object
	VendorData  map[string]any `json:"vendor_data,omitempty"`
}

// FromDict decodes the dict a client sent.
func FromDict(d map[string]any) (Drive, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return Drive{}, err
	}
	var out Drive
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return Drive{}, fmt.Errorf("invalid config drive: %w", err)
	}
	return out, nil
}

// files returns the config drive's files by path, as OpenStack lays them out
// (both the dated and the latest directory).
func (d Drive) files(nodeUUID, nodeName string) (map[string][]byte, error) {
	meta := map[string]any{}
	for k, v := range d.MetaData {
		meta[k] = v
	}
	if _, ok := meta["uuid"]; !ok {
		meta["uuid"] = nodeUUID
	}
	if _, ok := meta["name"]; !ok && nodeName != "" {
		meta["name"] = nodeName
	}
	out := map[string][]byte{}
	add := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		for _, dir := range []string{"openstack/2012-08-10", "openstack/latest"} {
			out[dir+"/"+name] = b
		}
		return nil
	}
	if err := add("meta_data.json", meta); err != nil {
		return nil, err
	}
	if d.NetworkData != nil {
		if err := add("network_data.json", d.NetworkData); err != nil {
			return nil, err
		}
	}
	if d.VendorData != nil {
		if err := add("vendor_data2.json", d.VendorData); err != nil {
			return nil, err
		}
	}
	switch u := d.UserData.(type) {
	case nil:
	case string:
		for _, dir := range []string{"openstack/2012-08-10", "openstack/latest"} {
			out[dir+"/user_data"] = []byte(u)
		}
	default:
		b, err := json.Marshal(u)
		if err != nil {
			return nil, fmt.Errorf("encode user_data: %w", err)
		}
		for _, dir := range []string{"openstack/2012-08-10", "openstack/latest"} {
			out[dir+"/user_data"] = b
		}
	}
	return out, nil
}

// ISO builds the config drive image.
func (d Drive) ISO(nodeUUID, nodeName string) ([]byte, error) {
	files, err := d.files(nodeUUID, nodeName)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, b := range files {
		total += int64(len(b))
	}
	if total > MaxSize-1<<20 {
		return nil, fmt.Errorf("config drive content is %d bytes; the limit is %d", total, MaxSize-1<<20)
	}
	dir, err := os.MkdirTemp("", "kiln-configdrive")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config-2.iso")
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o700); err != nil {
		return nil, err
	}
	size := total*2 + 2<<20
	dsk, err := diskfs.Create(path, size, diskfs.SectorSizeDefault)
	if err != nil {
		return nil, fmt.Errorf("create config drive image: %w", err)
	}
	defer dsk.Close()
	dsk.LogicalBlocksize = 2048
	fs, err := dsk.CreateFilesystem(disk.FilesystemSpec{Partition: 0, FSType: filesystem.TypeISO9660, VolumeLabel: Label, WorkDir: filepath.Join(dir, "work")})
	if err != nil {
		return nil, fmt.Errorf("create ISO9660 filesystem: %w", err)
	}
	for _, sub := range []string{"/openstack", "/openstack/2012-08-10", "/openstack/latest"} {
		if err := fs.Mkdir(sub); err != nil {
			return nil, fmt.Errorf("mkdir %s: %w", sub, err)
		}
	}
	for name, b := range files {
		f, err := fs.OpenFile("/"+name, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		if _, err := f.Write(b); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	iso, ok := fs.(*iso9660.FileSystem)
	if !ok {
		return nil, fmt.Errorf("unexpected filesystem type %T", fs)
	}
	if err := iso.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: fmt.Sprintf("%-32s", Label)}); err != nil {
		return nil, fmt.Errorf("finalize ISO9660: %w", err)
	}
	return os.ReadFile(path)
}

// Encode gzips and base64-encodes an image, the form write_image takes.
func Encode(iso []byte) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(iso); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
