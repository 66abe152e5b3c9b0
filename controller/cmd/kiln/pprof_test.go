package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPprofListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:0", "[::]:0", "example.com:0", "no-port"} {
		stop, err := startPprof(addr, slog.New(slog.DiscardHandler))
		if err == nil {
			stop()
			t.Errorf("startPprof(%q) accepted a non-loopback address", addr)
		}
	}
}

func TestPprofListenServesProfiles(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		stop, err := startPprof(addr, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("startPprof(%q): %v", addr, err)
		}
		stop()
	}
	// The handler set, without a listener: the index lists the profiles.
	rec := httptest.NewRecorder()
	pprofMux().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine") {
		t.Fatalf("pprof index: status %d body %.200s", rec.Code, rec.Body.String())
	}
}
