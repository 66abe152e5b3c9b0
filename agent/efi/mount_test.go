package efi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMount(t *testing.T) {
	for _, tc := range []struct {
		name        string
		uefi        bool
		mounted     bool
		fail        error
		wantMounted bool
		wantCalls   int
		wantErr     string
	}{
		{name: "BIOS machine: nothing to mount"},
		{name: "UEFI, efivarfs already there", uefi: true, mounted: true},
		{name: "UEFI, not mounted yet", uefi: true, wantMounted: true, wantCalls: 1},
		{name: "UEFI, the mount fails", uefi: true, fail: errors.New("no such device"), wantCalls: 1, wantErr: "mount efivarfs on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := t.TempDir()
			dir := filepath.Join(sys, "firmware/efi/efivars")
			if tc.uefi {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			calls := 0
			got, err := mount(sys, dir, func(string) bool { return tc.mounted }, func(d string) error {
				calls++
				if d != dir {
					t.Errorf("mounted on %s, want %s", d, dir)
				}
				return tc.fail
			})
			if got != tc.wantMounted || calls != tc.wantCalls || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("mounted %v after %d calls, err %v; want %v, %d, %q", got, calls, err, tc.wantMounted, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
