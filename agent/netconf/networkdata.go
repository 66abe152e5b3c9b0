package netconf

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
)

// Where a host's NMState network data can come from, in the order
// LoadNetworkData tries them.
const (
	// ArgNetworkData is a kernel argument carrying the NMState document
	// itself, base64-encoded (standard or URL alphabet, padding optional),
	// optionally gzip-compressed before encoding to fit the command line:
	//
	//	kiln.network_data=aW50ZXJmYWNlczoKLSBuYW1lOiBldGgw…
	ArgNetworkData = "kiln.network_data"
	// ArgNetworkDataURL is a kernel argument naming an http(s) URL to fetch
	// the document from (reachable before the host's own configuration is
	// applied, e.g. over a provisioning network with DHCP).
	ArgNetworkDataURL = "kiln.network_data_url"
	// NetworkDataFile is the document inside the initramfs: controller/boot
	// appends it to the ramdisk of a node with network_data.
	NetworkDataFile = "/etc/kiln/network.yaml"
)

// maxNetworkData bounds a fetched document.
const maxNetworkData = 1 << 20

// LoadNetworkData returns the host's NMState document and where it came
// from ("kernel command line", the URL, or the file), or nil when there is
// none. cmdline is /proc/cmdline's content; readFile reads the initramfs
// (os.ReadFile); client fetches ArgNetworkDataURL (nil: http.DefaultClient).
func LoadNetworkData(ctx context.Context, cmdline string, readFile func(string) ([]byte, error), client *http.Client) ([]byte, string, error) {
	args := map[string]string{}
	for _, f := range strings.Fields(cmdline) {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = strings.Trim(v, `"`)
		}
	}
	if v, ok := args[ArgNetworkData]; ok {
		b, err := DecodeNetworkDataArg(v)
		if err != nil {
			return nil, "", err
		}
		return b, "kernel command line " + ArgNetworkData, nil
	}
	if u, ok := args[ArgNetworkDataURL]; ok {
		b, err := fetchNetworkData(ctx, client, u)
		if err != nil {
			return nil, "", err
		}
		return b, u, nil
	}
	b, err := readFile(NetworkDataFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read network data %s: %w", NetworkDataFile, err)
	}
	return b, NetworkDataFile, nil
}

// DecodeNetworkDataArg decodes ArgNetworkData's value.
func DecodeNetworkDataArg(v string) ([]byte, error) {
	v = strings.TrimRight(strings.TrimSpace(v), "=")
	var b []byte
	var err error
	if strings.ContainsAny(v, "-_") {
		b, err = base64.RawURLEncoding.DecodeString(v)
	} else {
		b, err = base64.RawStdEncoding.DecodeString(v)
	}
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", ArgNetworkData, err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", ArgNetworkData, err)
		}
		b, err = io.ReadAll(io.LimitReader(zr, maxNetworkData+1))
		if err != nil {
			return nil, fmt.Errorf("decode %s: gunzip: %w", ArgNetworkData, err)
		}
		if len(b) > maxNetworkData {
			return nil, fmt.Errorf("decode %s: larger than %d bytes", ArgNetworkData, maxNetworkData)
		}
	}
	return b, nil
}

func fetchNetworkData(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, fmt.Errorf("%s=%s: not an http(s) URL", ArgNetworkDataURL, u)
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch network data %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch network data: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch network data %s: HTTP %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNetworkData+1))
	if err != nil {
		return nil, fmt.Errorf("fetch network data %s: %w", u, err)
	}
	if len(b) > maxNetworkData {
		return nil, fmt.Errorf("fetch network data %s: larger than %d bytes", u, maxNetworkData)
	}
	return b, nil
}

// ParseNetworkData reads network data in the forms a controller delivers
// it: an NMState document as bytes or a string (YAML or JSON), or already
// decoded from JSON as a map (the node's network_data field). OpenStack's
// network_data.json layout (links/networks/services) is refused by name.
func ParseNetworkData(v any) (Config, error) {
	switch d := v.(type) {
	case []byte:
		return ParseNMState(d)
	case string:
		return ParseNMState([]byte(d))
	case map[string]any:
		if _, ok := d["links"]; ok {
			return Config{}, errors.New("parse network data: OpenStack network_data.json (links/networks/services) is not supported; send an NMState document")
		}
		b, err := json.Marshal(d)
		if err != nil {
			return Config{}, fmt.Errorf("parse network data: %w", err)
		}
		return ParseNMState(b)
	case nil:
		return Config{}, errors.New("parse network data: none given")
	}
	return Config{}, fmt.Errorf("parse network data: unsupported %T", v)
}
