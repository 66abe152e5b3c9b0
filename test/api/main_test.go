// Package api_test drives a real `kiln serve` process over HTTP: with
// gophercloud (a client Kiln did not write), with raw requests for bad input,
// and across restarts on the same database file.
package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var kilnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-apitest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kilnBin = filepath.Join(dir, "kiln")
	build := exec.Command("go", "build", "-o", kilnBin, "github.com/kilnhq/kiln/controller/cmd/kiln")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build kiln:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kiln is one running `kiln serve` process.
type kiln struct {
	t    *testing.T
	cmd  *exec.Cmd
	URL  string
	logs *bytes.Buffer
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startKiln runs `kiln serve` on db and waits until GET /v1/ answers.
func startKiln(t *testing.T, db string) *kiln {
	t.Helper()
	addr := freePort(t)
	k := &kiln{t: t, URL: "http://" + addr, logs: &bytes.Buffer{}}
	k.cmd = exec.Command(kilnBin, "serve", "--listen", addr, "--db", db, "--conductor", "test-conductor")
	k.cmd.Stdout, k.cmd.Stderr = k.logs, k.logs
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if k.cmd.ProcessState == nil {
			_ = k.cmd.Process.Kill()
			_ = k.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("kiln logs:\n%s", k.logs)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(k.URL + "/v1/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return k
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("kiln did not start:\n%s", k.logs)
	return nil
}

// stop sends SIGTERM and waits for a clean exit.
func (k *kiln) stop() {
	k.t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		k.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			k.t.Fatalf("kiln exited with %v after SIGTERM:\n%s", err, k.logs)
		}
	case <-time.After(20 * time.Second):
		_ = k.cmd.Process.Kill()
		k.t.Fatalf("kiln did not stop on SIGTERM:\n%s", k.logs)
	}
}

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
