package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/internal/syspath"
)

func TestISOReadableByIsoinfo(t *testing.T) {
	d, err := FromDict(map[string]any{
		"meta_data":    map[string]any{"local-hostname": "worker-0"},
		"user_data":    map[string]any{"ignition": map[string]any{"version": "3.2.0"}},
		"network_data": map[string]any{"links": []any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	iso, err := d.ISO("816cf2f8-b1ea-4bb6-a4b6-df6a24d567e4", "worker-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(iso) > MaxSize {
		t.Fatalf("ISO is %d bytes", len(iso))
	}
	// The primary volume descriptor at 32 KiB names the volume config-2,
	// padded with spaces as ISO 9660 requires (readers that compare the
	// whole field, not a trimmed one, would miss a NUL-padded label).
	if vid := string(iso[32768+40 : 32768+72]); vid != "config-2"+strings.Repeat(" ", 24) {
		t.Fatalf("volume identifier %q", vid)
	}
	enc, err := Encode(iso)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(enc)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(zr)
	if !bytes.Equal(back, iso) {
		t.Fatal("Encode does not round-trip")
	}

	isoinfo, err := syspath.LookPath("isoinfo")
	if err != nil {
		t.Skip("isoinfo (genisoimage) not installed: cannot read the ISO back with an independent tool")
	}
	path := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(path, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(isoinfo, "-i", path, "-R", "-x", "/openstack/latest/meta_data.json").Output()
	if err != nil {
		t.Fatalf("isoinfo: %v", err)
	}
	for _, want := range []string{`"uuid":"816cf2f8-b1ea-4bb6-a4b6-df6a24d567e4"`, `"local-hostname":"worker-0"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("meta_data.json = %s, missing %s", out, want)
		}
	}
	out, err = exec.Command(isoinfo, "-i", path, "-R", "-x", "/openstack/latest/user_data").Output()
	if err != nil || !strings.Contains(string(out), `"version":"3.2.0"`) {
		t.Errorf("user_data = %s, %v", out, err)
	}
	out, _ = exec.Command(isoinfo, "-d", "-i", path).Output()
	if !strings.Contains(string(out), "Volume id: config-2") {
		t.Errorf("isoinfo -d: %s", out)
	}
}

func TestFromDictRejectsUnknownKeys(t *testing.T) {
	if _, err := FromDict(map[string]any{"meta_data": map[string]any{}, "bogus": 1}); err == nil {
		t.Fatal("unknown key accepted")
	}
}
