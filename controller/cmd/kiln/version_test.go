package main

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
)

func TestVersionOf(t *testing.T) {
	maxMicro := fmt.Sprintf("1.%d", api.MaxMinor)
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want buildVersion
	}{
		{"no build info", nil, buildVersion{"unknown", "unknown", "unknown", "unknown", maxMicro}},
		{"go run: no vcs", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			buildVersion{"(devel)", "unknown", "unknown", "go1.26.0", maxMicro}},
		{"clean checkout", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "1ea7f1e0"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			buildVersion{"v0.3.0", "1ea7f1e0", "2026-12-01T10:00:00Z", "go1.26.1", maxMicro}},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.1", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "1ea7f1e0"}, {Key: "vcs.modified", Value: "true"}}},
			buildVersion{"unknown", "1ea7f1e0-dirty", "unknown", "go1.26.1", maxMicro}},
	} {
		if got := versionOf(tc.info); got != tc.want {
			t.Errorf("%s: versionOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestVersionCommandAndFlag: `kiln version` and `kiln --version` print the
// same lines, which name the Go version this test runs with and the API's
// microversion range.
func TestVersionCommandAndFlag(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("kiln %v: exit %d: %s", args, code, errb.String())
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("kiln version printed\n%s\nkiln --version printed\n%s", outs[0], outs[1])
	}
	info, _ := debug.ReadBuildInfo()
	for _, want := range []string{"kiln ", "commit:", "go:               " + info.GoVersion, fmt.Sprintf("API microversion: 1.%d to 1.%d\n", api.MinMinor, api.MaxMinor)} {
		if !strings.Contains(outs[0], want) {
			t.Errorf("kiln version output lacks %q:\n%s", want, outs[0])
		}
	}
}
