package driver

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/kilnhq/kiln/proto"
)

// fakeFirmware is fake-hardware's firmware interface: a BIOS, a BMC and a
// NIC, kept per node in memory, with the vendor, model and serial number a
// real BMC reports (API 1.114), so firmware.update and GET
// /v1/nodes/{id}/firmware run without a BMC. An update installs the
// version in the image's file name ("bmc-2.1.0.bin" → "2.1.0"), else the
// current one with its last number incremented. driver_info
// fake_firmware_error fails every call.
type fakeFirmware struct{ nodes sync.Map } // node UUID → map[string]string (component → version)

// fakeComponents are the components of a new fake node, by name.
var fakeComponents = map[string]FirmwareVersion{
	"bios":         {Component: "bios", Version: "1.0.0"},
	"bmc":          {Component: "bmc", Version: "1.0.0", Model: "Fake BMC"},
	"NIC:FAKE0001": {Component: "NIC:FAKE0001", Version: "22.0.9", Vendor: "Kiln", Model: "Fake 25GbE 2P Adapter", SerialNumber: "FAKE0001"},
}

func init() { RegisterFirmware("fake", &fakeFirmware{}) }

func (f *fakeFirmware) versions(n *proto.Node) map[string]string {
	if v, ok := f.nodes.Load(n.UUID); ok {
		return maps.Clone(v.(map[string]string))
	}
	m := map[string]string{}
	for name, c := range fakeComponents {
		m[name] = c.Version
	}
	return m
}

func (f *fakeFirmware) Components(ctx context.Context, n *proto.Node) ([]FirmwareVersion, error) {
	if err := fakeAct(ctx, n, "firmware"); err != nil {
		return nil, err
	}
	cur := f.versions(n)
	out := make([]FirmwareVersion, 0, len(cur))
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		c := fakeComponents[name]
		c.Version = cur[name]
		out = append(out, c)
	}
	return out, nil
}

var fakeImageVersion = regexp.MustCompile(`\d+(\.\d+)+`)

func (f *fakeFirmware) Update(ctx context.Context, n *proto.Node, updates []FirmwareUpdate, env StepEnv) error {
	if err := fakeAct(ctx, n, "firmware"); err != nil {
		return err
	}
	cur := f.versions(n)
	for _, u := range updates {
		if _, ok := cur[u.Component]; !ok {
			return fmt.Errorf("fake firmware has no component %s (it has %s)", u.Component, strings.Join(slices.Sorted(maps.Keys(cur)), ", "))
		}
	}
	for _, u := range updates {
		file := u.URL[strings.LastIndex(u.URL, "/")+1:]
		if v := fakeImageVersion.FindString(file); v != "" {
			cur[u.Component] = v
		} else {
			cur[u.Component] += ".1"
		}
	}
	if env.Reboot != nil {
		if err := env.Reboot(ctx); err != nil {
			return err
		}
	}
	f.nodes.Store(n.UUID, cur)
	return nil
}
