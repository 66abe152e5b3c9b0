// Package deploy holds what deploying needs to know about a node's instance
// and that both the API (validate) and the conductor (write_image) use.
package deploy

import (
	"fmt"
	"path"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// ImageInfo builds write_image's image_info from instance_info (spec §6).
func ImageInfo(n *proto.Node) (proto.ImageInfo, error) {
	ii := n.InstanceInfo
	str := func(k string) string { v, _ := ii[k].(string); return v }
	src := str("image_source")
	if src == "" {
		return proto.ImageInfo{}, fmt.Errorf("instance_info.image_source is required for the direct deploy interface")
	}
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "file://") {
		return proto.ImageInfo{}, fmt.Errorf("instance_info.image_source %q must be an http(s):// or file:// URL", src)
	}
	info := proto.ImageInfo{
		ID:              path.Base(strings.SplitN(src, "?", 2)[0]),
		URLs:            []string{src},
		DiskFormat:      firstNonEmpty(str("image_disk_format"), "raw"),
		ContainerFormat: "bare",
		StreamRawImages: true,
		NodeUUID:        n.UUID,
		ImageType:       firstNonEmpty(str("image_type"), "whole-disk"),
	}
	switch {
	case str("image_os_hash_algo") != "" && str("image_os_hash_value") != "":
		info.OSHashAlgo, info.OSHashValue = str("image_os_hash_algo"), str("image_os_hash_value")
	case str("image_checksum") != "":
		info.Checksum = str("image_checksum")
	default:
		return proto.ImageInfo{}, fmt.Errorf("instance_info needs image_checksum, or image_os_hash_algo and image_os_hash_value, to verify the image")
	}
	if hints, ok := ii["root_device"].(map[string]any); ok {
		info.RootDevice = hints
	} else if hints, ok := n.Properties["root_device"].(map[string]any); ok {
		info.RootDevice = hints
	}
	return info, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Validate checks that the node's instance_info is enough for its deploy
// interface: direct needs an image URL and a way to verify it.
func Validate(n *proto.Node) error {
	switch n.DeployInterface {
	case "direct":
		_, err := ImageInfo(n)
		return err
	case "custom-agent", "ramdisk", "fake":
		return nil
	}
	return fmt.Errorf("unknown deploy interface %q", n.DeployInterface)
}
