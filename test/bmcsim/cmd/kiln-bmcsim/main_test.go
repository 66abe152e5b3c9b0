package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
)

// TestRunServesBMCsAndAdmin runs the command's main logic: it must print one
// JSON line per BMC, serve Redfish on each, and serve the admin API.
func TestRunServesBMCsAndAdmin(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	ready := make(chan *bmcsim.Lab, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-n", "3", "-personality", "idrac", "-admin", "127.0.0.1:0"}, &out, ready)
	}()
	var lab *bmcsim.Lab
	select {
	case lab = <-ready:
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("lab did not start")
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	n := 0
	for sc.Scan() {
		var row struct {
			URL      string   `json:"url"`
			Username string   `json:"username"`
			Systems  []string `json:"systems"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		req, _ := http.NewRequest("GET", row.URL+"/redfish/v1/Systems/"+row.Systems[0], nil)
		req.SetBasicAuth(row.Username, bmcsim.DefaultPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || row.Systems[0] != "System.Embedded.1" {
			t.Errorf("BMC %s: %d %v", row.URL, resp.StatusCode, row.Systems)
		}
		n++
	}
	if n != 3 || len(lab.BMCs) != 3 {
		t.Errorf("printed %d BMCs, lab has %d", n, len(lab.BMCs))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-backend", "vmware"},
		{"-personality", "nokia"},
		{"-backend", "qemu"},
	} {
		if err := run(context.Background(), append(args, "-admin", ""), io.Discard, nil); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
