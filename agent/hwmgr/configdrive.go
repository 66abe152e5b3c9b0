package hwmgr

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
)

// maxEncodedConfigDrive bounds a downloaded config drive: base64 of a gzipped
// 64 MiB image cannot be larger than base64 of the image itself.
const maxEncodedConfigDrive = disk.MaxConfigDriveSize/3*4 + 4096

func isHTTPURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// DecodeConfigDrive turns a config drive as sent into the image to write:
// base64 is decoded when the data is base64 (whitespace ignored), then gzip
// is uncompressed when the data is gzipped; data that is neither is written
// as given, as IPA does. The image must be non-empty and at most 64 MiB.
func DecodeConfigDrive(data []byte) ([]byte, error) {
	compact := bytes.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r':
			return -1
		}
		return r
	}, data)
	if dec, err := base64.StdEncoding.DecodeString(string(compact)); err == nil && len(compact) > 0 {
		data = dec
	} else if dec, err := base64.RawStdEncoding.DecodeString(string(compact)); err == nil && len(compact) > 0 {
		data = dec
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("config drive: gunzip: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, disk.MaxConfigDriveSize+1))
		if err != nil {
			return nil, fmt.Errorf("config drive: gunzip: %w", err)
		}
		data = out
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("config drive is empty")
	}
	if len(data) > disk.MaxConfigDriveSize {
		return nil, fmt.Errorf("config drive is larger than %d bytes", disk.MaxConfigDriveSize)
	}
	return data, nil
}

// fetch GETs url, refusing bodies over limit bytes.
func (m *Manager) fetch(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("GET %s: more than %d bytes", url, limit)
	}
	return b, nil
}
