package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/controller/api"
)

// buildVersion is what `kiln version` reports: which source a binary was
// built from and which API it serves, so that a bug report can name both.
type buildVersion struct {
	Module   string // module version: a tag, a pseudo-version, or (devel)
	Commit   string // vcs.revision, with "-dirty" when vcs.modified
	Date     string // vcs.time: the commit's time (Go records no build time)
	Go       string
	MaxMicro string // the highest API microversion served
}

// readVersion reads the Go build information the toolchain embeds; go run
// and go test record no VCS settings, so Commit and Date may be "unknown".
func readVersion() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info)
}

func versionOf(info *debug.BuildInfo) buildVersion {
	v := buildVersion{Module: "unknown", Commit: "unknown", Date: "unknown", Go: "unknown",
		MaxMicro: fmt.Sprintf("1.%d", api.MaxMinor)}
	if info == nil {
		return v
	}
	if info.Main.Version != "" {
		v.Module = info.Main.Version
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Date = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && v.Commit != "unknown" {
		v.Commit += "-dirty"
	}
	return v
}

// String is the multi-line form printed by `kiln version` and `kiln --version`.
func (v buildVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kiln %s\n", v.Module)
	fmt.Fprintf(&b, "  commit:           %s\n", v.Commit)
	fmt.Fprintf(&b, "  commit date:      %s\n", v.Date)
	fmt.Fprintf(&b, "  go:               %s\n", v.Go)
	fmt.Fprintf(&b, "  API microversion: 1.%d to %s\n", api.MinMinor, v.MaxMicro)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, commit, commit date, Go version and API microversions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), readVersion())
			return err
		},
	}
}
