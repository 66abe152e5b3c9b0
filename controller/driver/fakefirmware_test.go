package driver

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

var fakeFirmwareRuns atomic.Int64

// TestFakeFirmware: fake-hardware's firmware interface reports its three
// components with vendor, model and serial number, installs the version an
// image's name carries (or the next one), refuses an unknown component
// whole, and fails with fake_firmware_error.
func TestFakeFirmware(t *testing.T) {
	ctx := context.Background()
	// The fake keeps each node's firmware for the life of the process: a
	// node of its own per run, so -count runs start alike.
	run := fakeFirmwareRuns.Add(1)
	n := &proto.Node{UUID: fmt.Sprintf("0b9c2b7e-8d3a-4c1f-9a55-%012d", run), Driver: FakeHardware, FirmwareInterface: "fake"}
	fw, err := ResolveFirmware(n)
	if err != nil {
		t.Fatal(err)
	}
	read := func() map[string]FirmwareVersion {
		t.Helper()
		list, err := fw.Components(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]FirmwareVersion{}
		for _, c := range list {
			m[c.Component] = c
		}
		return m
	}
	got := read()
	want := map[string]FirmwareVersion{
		"bios":         {Component: "bios", Version: "1.0.0"},
		"bmc":          {Component: "bmc", Version: "1.0.0", Model: "Fake BMC"},
		"NIC:FAKE0001": {Component: "NIC:FAKE0001", Version: "22.0.9", Vendor: "Kiln", Model: "Fake 25GbE 2P Adapter", SerialNumber: "FAKE0001"},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %+v, want %+v", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("components %v", got)
	}

	reboots := 0
	env := StepEnv{Reboot: func(context.Context) error { reboots++; return nil }}
	if err := fw.Update(ctx, n, []FirmwareUpdate{
		{Component: "bmc", URL: "http://images.example/bmc-2.1.0.bin"},
		{Component: "bios", URL: "http://images.example/latest.bin"},
	}, env); err != nil {
		t.Fatal(err)
	}
	got = read()
	if got["bmc"].Version != "2.1.0" || got["bios"].Version != "1.0.0.1" || got["NIC:FAKE0001"].Version != "22.0.9" || got["bmc"].Model != "Fake BMC" {
		t.Errorf("after the update: %+v", got)
	}
	if reboots != 1 {
		t.Errorf("%d reboots, want 1", reboots)
	}

	err = fw.Update(ctx, n, []FirmwareUpdate{
		{Component: "bios", URL: "http://images.example/bios-9.9.bin"},
		{Component: "cpld", URL: "http://images.example/cpld-1.2.bin"},
	}, env)
	if err == nil || !strings.Contains(err.Error(), "no component cpld") {
		t.Errorf("update of an unknown component: %v", err)
	}
	if v := read()["bios"].Version; v != "1.0.0.1" {
		t.Errorf("bios %s after a refused update, want 1.0.0.1", v)
	}

	bad := &proto.Node{UUID: "0b9c2b7e-8d3a-4c1f-9a55-5d2c7c1e0f02", Driver: FakeHardware, FirmwareInterface: "fake",
		DriverInfo: proto.Dict{"fake_firmware_error": "flash chip on fire"}}
	if _, err := fw.Components(ctx, bad); err == nil || !strings.Contains(err.Error(), "flash chip on fire") {
		t.Errorf("components with fake_firmware_error: %v", err)
	}
}
