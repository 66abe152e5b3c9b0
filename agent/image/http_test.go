package image

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestNoRangeSupport: a server that ignores Range cannot resume a dropped
// stream, nor serve qcow2; both fail with a message saying so.
func TestNoRangeSupport(t *testing.T) {
	needTool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 8*mib, 8*mib)
	qemuImg(t, "convert", "-O", "qcow2", raw, filepath.Join(dir, "disk.qcow2"))
	srv := newImageServer(t, dir)
	srv.noRanges = true
	target := filepath.Join(t.TempDir(), "disk")
	makeTarget(t, target, 8*mib)

	req := writeReq(t, srv.url("disk.qcow2"), "sha256", sumFile(t, "sha256", filepath.Join(dir, "disk.qcow2")), target)
	if _, err := Write(context.Background(), req); err == nil || !strings.Contains(err.Error(), "does not support ranges") {
		t.Errorf("qcow2 without ranges: %v", err)
	}

	srv.dropAfter = 6 * mib // after the first 4 MiB chunk was written
	srv.drops.Store(1)
	req = writeReq(t, srv.url("disk.raw"), "sha256", sumFile(t, "sha256", raw), target)
	if _, err := Write(context.Background(), req); err == nil || !strings.Contains(err.Error(), "does not support ranges") {
		t.Errorf("dropped stream without ranges: %v", err)
	}
	// The disk was touched: first and last MiB must be zeroed.
	if !isZero(readAt(t, target, 0, mib)) || !isZero(readAt(t, target, 7*mib, mib)) {
		t.Error("first/last MiB not zeroed after a failed write")
	}
}

// TestHTTPSAndProxy: a custom CA is needed and enough for an HTTPS image
// server, and a proxy is used when given.
func TestHTTPSAndProxy(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 4*mib, 3*mib)
	files := newImageServer(t, dir)
	tlsSrv := httptest.NewTLSServer(files.Config.Handler)
	defer tlsSrv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	target := filepath.Join(t.TempDir(), "disk")
	makeTarget(t, target, 4*mib)
	sum := sumFile(t, "sha256", raw)

	req := writeReq(t, tlsSrv.URL+"/disk.raw", "sha256", sum, target)
	if _, err := Write(context.Background(), req); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("unknown CA accepted: %v", err)
	}
	req.CACert = caPEM
	if _, err := Write(context.Background(), req); err != nil {
		t.Fatalf("with the CA: %v", err)
	}

	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		out, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	req = writeReq(t, files.url("disk.raw"), "sha256", sum, target)
	req.Proxy = proxy.URL
	if _, err := Write(context.Background(), req); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if proxied.Load() == 0 {
		t.Error("the proxy was not used")
	}
	if got, want := fileSHA(t, target, 4*mib), fileSHA(t, raw, 4*mib); got != want {
		t.Errorf("disk sha256 %s, want %s", got, want)
	}
}
