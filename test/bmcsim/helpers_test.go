package bmcsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// startLab starts n memory BMCs of a personality and closes them at cleanup.
func startLab(t testing.TB, n int, personality string) *Lab {
	t.Helper()
	l, err := StartLab(LabConfig{N: n, Personality: personality})
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// do sends a request with basic auth (if user != "") and returns status,
// headers and the decoded JSON body (nil if empty).
func do(t testing.TB, c *http.Client, method, url, user, pass string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = bytes.NewBufferString(b)
		default:
			j, _ := json.Marshal(b)
			rd = bytes.NewReader(j)
		}
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, url, b)
		}
	}
	return resp.StatusCode, resp.Header, m
}

// errorCode returns error.code and the first MessageId of a Redfish error body.
func errorCode(t testing.TB, m map[string]any) (code, msgID string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %v", m)
	}
	code, _ = e["code"].(string)
	if _, ok := e["message"].(string); !ok {
		t.Errorf("error without message: %v", m)
	}
	info, ok := e["@Message.ExtendedInfo"].([]any)
	if !ok || len(info) == 0 {
		t.Fatalf("error without @Message.ExtendedInfo: %v", m)
	}
	msgID, _ = info[0].(map[string]any)["MessageId"].(string)
	return code, msgID
}
