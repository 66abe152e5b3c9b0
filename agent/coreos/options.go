package coreos

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/agent/disk/hints"
	"github.com/kilnhq/kiln/agent/image"
)

// Options is what one install_coreos call was asked to do, read from the
// node the controller sent.
type Options struct {
	// Ignition is the config to install (JSON), nil when the configdrive
	// has no user_data.
	Ignition []byte
	// AppendKargs are meta_data.coreos_append_karg.
	AppendKargs []string
	// CopyNetwork is meta_data.coreos_copy_network (default true).
	CopyNetwork bool
	// ImageURL is instance_info.image_source (image_url when the source
	// is not a URL, e.g. a Glance ID); Checksum its checksum when
	// one was given (HasChecksum).
	ImageURL    string
	Checksum    image.Checksum
	HasChecksum bool
	// Hints are properties.root_device (or instance_info.root_device);
	// Skip is properties.skip_block_devices' names.
	Hints hints.Hints
	Skip  []string
}

// ErrRenderedConfigdrive refuses the string form of a configdrive: the
// Ignition config and the CoreOS metadata must come as a dict.
var ErrRenderedConfigdrive = errors.New("cannot use a pre-rendered configdrive: pass it as JSON data (a dict with user_data and meta_data)")

// ParseOptions reads Options from a node dict (node.instance_info,
// node.properties) as Ironic and Kiln send it with execute_deploy_step.
// Values Metal3 never sends in another form are still read leniently where
// Ironic itself is lenient (booleans as strings, a karg list as one string).
func ParseOptions(node map[string]any, allowMD5 bool) (Options, error) {
	o := Options{CopyNetwork: true}
	ii, _ := node["instance_info"].(map[string]any)
	props, _ := node["properties"].(map[string]any)

	switch cd := ii["configdrive"].(type) {
	case nil:
	case string:
		if cd != "" {
			return o, ErrRenderedConfigdrive
		}
	case map[string]any:
		if err := o.readConfigdrive(cd); err != nil {
			return o, err
		}
	default:
		return o, fmt.Errorf("instance_info.configdrive: want a dict, got %T", cd)
	}

	// install_coreos reads image_source, as Metal3's manager does; Ironic's
	// computed image_url stands in when the source is not a URL.
	o.ImageURL = str(ii["image_source"])
	if u := str(ii["image_url"]); u != "" && !strings.Contains(o.ImageURL, "://") {
		o.ImageURL = u
	}
	if algo, val := str(ii["image_os_hash_algo"]), str(ii["image_os_hash_value"]); val != "" {
		c, err := image.ParseChecksum(algo, val, allowMD5)
		if err != nil {
			return o, fmt.Errorf("instance_info image_os_hash_value: %w", err)
		}
		o.Checksum, o.HasChecksum = c, true
	} else if val := str(ii["image_checksum"]); val != "" {
		c, err := image.ParseChecksum("", val, allowMD5)
		if err != nil {
			return o, fmt.Errorf("instance_info image_checksum: %w", err)
		}
		o.Checksum, o.HasChecksum = c, true
	}

	rd, _ := props["root_device"].(map[string]any)
	if rd == nil {
		rd, _ = ii["root_device"].(map[string]any)
	}
	if rd != nil {
		h, err := hints.ParseHints(rd)
		if err != nil {
			return o, fmt.Errorf("root device hints: %w", err)
		}
		o.Hints = h
	}
	if skip, ok := props["skip_block_devices"].([]any); ok {
		for _, s := range skip {
			if m, ok := s.(map[string]any); ok {
				if n := str(m["name"]); n != "" {
					o.Skip = append(o.Skip, n)
				}
			}
		}
	}
	return o, nil
}

func (o *Options) readConfigdrive(cd map[string]any) error {
	switch ud := cd["user_data"].(type) {
	case nil:
	case string:
		if strings.TrimSpace(ud) != "" {
			o.Ignition = []byte(ud)
		}
	case map[string]any:
		b, err := json.Marshal(ud)
		if err != nil {
			return fmt.Errorf("configdrive user_data: %w", err)
		}
		o.Ignition = b
	default:
		return fmt.Errorf("configdrive user_data: want an Ignition config (string or object), got %T", ud)
	}
	md, _ := cd["meta_data"].(map[string]any)
	switch k := md["coreos_append_karg"].(type) {
	case nil:
	case []any:
		for i, a := range k {
			s, ok := a.(string)
			if !ok {
				return fmt.Errorf("meta_data.coreos_append_karg[%d]: want a string, got %T", i, a)
			}
			if s = strings.TrimSpace(s); s != "" {
				o.AppendKargs = append(o.AppendKargs, s)
			}
		}
	case string:
		o.AppendKargs = strings.Fields(k)
	default:
		return fmt.Errorf("meta_data.coreos_append_karg: want a list of strings, got %T", k)
	}
	switch c := md["coreos_copy_network"].(type) {
	case nil:
	case bool:
		o.CopyNetwork = c
	case string:
		b, err := strconv.ParseBool(c)
		if err != nil {
			return fmt.Errorf("meta_data.coreos_copy_network: %w", err)
		}
		o.CopyNetwork = b
	default:
		return fmt.Errorf("meta_data.coreos_copy_network: want a boolean, got %T", c)
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}
