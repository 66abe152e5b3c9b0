package raid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Assemble runs mdadm --assemble --scan and reports the arrays then
// running (from sysfs), whether mdadm found any or failed.
func TestAssemble(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mdadm  error
		arrays map[string][]string // md device → its members in sysfs
		want   []string
	}{
		{"an array built by an earlier clean", nil, map[string][]string{"md127": {"vda2", "vdb2"}, "md127p1": nil, "md126": {"vda1", "vdb1"}}, []string{"/dev/md126", "/dev/md127"}},
		{"no arrays: mdadm fails, nothing runs", errors.New("mdadm: No arrays found in config file or automatically"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := t.TempDir()
			if err := os.MkdirAll(filepath.Join(sys, "block", "vda"), 0o755); err != nil {
				t.Fatal(err)
			}
			for md, members := range tc.arrays {
				if err := os.MkdirAll(filepath.Join(sys, "block", md), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, m := range members {
					if err := os.MkdirAll(filepath.Join(sys, "block", md, "slaves", m), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			var ran [][]string
			m := New(Options{SysRoot: sys, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Run: func(_ context.Context, argv ...string) ([]byte, error) {
					ran = append(ran, argv)
					return nil, tc.mdadm
				}})
			got := m.Assemble(context.Background())
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("arrays %v, want %v", got, tc.want)
			}
			if len(ran) != 1 || strings.Join(ran[0], " ") != "mdadm --assemble --scan" {
				t.Errorf("ran %v, want mdadm --assemble --scan once", ran)
			}
		})
	}
}
