package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The hardware configuration resources (Bios, its registry and settings
// object) are read and written as plain JSON through the connection's
// client: it brings authentication, pacing, retries and BMCError, and the
// driver controls the headers Redfish needs there (If-Match).

// getJSON reads path into v and returns the resource's ETag.
func (s *session) getJSON(ctx context.Context, path string, v any) (string, error) {
	resp, err := s.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v); err != nil {
		return "", fmt.Errorf("BMC %s: GET %s: decode: %w", s.endpoint, path, err)
	}
	return resp.Header.Get("ETag"), nil
}

// do sends one request with a JSON body (nil for none) and extra headers;
// an answer of 400 or more is a BMCError naming BMC, request and answer.
func (s *session) do(ctx context.Context, method, path string, body any, header map[string]string) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.endpoint, "/")+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return s.http.Do(req)
}

// odataID is a Redfish link.
type odataID struct {
	ID string `json:"@odata.id"`
}
