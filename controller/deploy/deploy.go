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
func ImageInfo(n *proto.Node) (proto.Dict, error) {
	ii := n.InstanceInfo
	str := func(k string) string { v, _ := ii[k].(string); return v }
	src := str("image_source")
	if src == "" {
		return nil, fmt.Errorf("instance_info.image_source is required for the direct deploy interface")
	}
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "file://") {
		return nil, fmt.Errorf("instance_info.image_source %q must be an http(s):// or file:// URL", src)
	}
	info := proto.Dict{
		"id":                path.Base(strings.SplitN(src, "?", 2)[0]),
		"urls":              []string{src},
		"disk_format":       firstNonEmpty(str("image_disk_format"), "raw"),
		"container_format":  "bare",
		"stream_raw_images": true,
		"node_uuid":         n.UUID,
		"image_type":        firstNonEmpty(str("image_type"), "whole-disk"),
	}
	switch {
	case str("image_os_hash_algo") != "" && str("image_os_hash_value") != "":
		info["os_hash_algo"], info["os_hash_value"] = str("image_os_hash_algo"), str("image_os_hash_value")
	case str("image_checksum") != "":
		info["checksum"] = str("image_checksum")
	default:
		return nil, fmt.Errorf("instance_info needs image_checksum, or image_os_hash_algo and image_os_hash_value, to verify the image")
	}
	if hints, ok := ii["root_device"].(map[string]any); ok {
		info["root_device"] = hints
	} else if hints, ok := n.Properties["root_device"].(map[string]any); ok {
		info["root_device"] = hints
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
