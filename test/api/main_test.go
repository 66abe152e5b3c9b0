// Package api_test drives a real `kiln serve` process over HTTP: with
// gophercloud (a client Kiln did not write), with raw requests for bad input,
// and across restarts on the same database file.
package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

// kiln is one running `kiln serve` process.
type kiln struct {
	*kilnproc.Proc
	t *testing.T
}

// startKiln runs `kiln serve` on db and waits until GET /v1/ answers.
func startKiln(t *testing.T, db string) *kiln {
	t.Helper()
	return &kiln{Proc: kilnproc.Start(t, kilnBin, db, "--conductor", "test-conductor"), t: t}
}

// stop sends SIGTERM and waits for a clean exit.
func (k *kiln) stop() { k.Stop() }

// call sends one request at microversion 1.95 unless headers override it.
func (k *kiln) call(method, path, body string, headers ...string) (int, http.Header, []byte) {
	k.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, k.URL+path, r)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// mustJSON decodes a response body or fails the test.
func mustJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return m
}

// faultstring returns the message of an Ironic error body, failing the test
// if the body is not in Ironic's format.
func faultstring(t *testing.T, b []byte) string {
	t.Helper()
	outer := mustJSON(t, b)
	msg, ok := outer["error_message"].(string)
	if !ok {
		t.Fatalf("no error_message string in %s", b)
	}
	var inner map[string]any
	if err := json.Unmarshal([]byte(msg), &inner); err != nil {
		t.Fatalf("error_message is not a JSON document: %q", msg)
	}
	if fs, ok := inner["faultstring"].(string); ok {
		if _, ok := inner["faultcode"]; !ok {
			t.Errorf("error without faultcode: %s", msg)
		}
		return fs
	}
	if d, ok := inner["description"].(string); ok {
		return d
	}
	t.Fatalf("error_message has neither faultstring nor description: %s", msg)
	return ""
}

func sleep() { time.Sleep(20 * time.Millisecond) }
