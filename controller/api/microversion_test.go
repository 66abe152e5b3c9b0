package api

import (
	"net/http"
	"testing"
)

func TestParseMicroversion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
		wantErr bool
	}{
		{"none", nil, DefaultMinor, false},
		{"legacy", map[string]string{"X-OpenStack-Ironic-API-Version": "1.82"}, 82, false},
		{"new header", map[string]string{"OpenStack-API-Version": "baremetal 1.89"}, 89, false},
		{"new header wins", map[string]string{"OpenStack-API-Version": "baremetal 1.31", "X-OpenStack-Ironic-API-Version": "1.82"}, 31, false},
		{"other service ignored", map[string]string{"OpenStack-API-Version": "compute 2.1", "X-OpenStack-Ironic-API-Version": "1.40"}, 40, false},
		{"latest", map[string]string{"X-OpenStack-Ironic-API-Version": "latest"}, MaxMinor, false},
		{"latest new header", map[string]string{"OpenStack-API-Version": "baremetal latest"}, MaxMinor, false},
		{"metal3 pin", map[string]string{"X-OpenStack-Ironic-API-Version": "1.110"}, 110, false},
		{"min", map[string]string{"X-OpenStack-Ironic-API-Version": "1.1"}, 1, false},
		{"too high", map[string]string{"X-OpenStack-Ironic-API-Version": "1.116"}, 0, true},
		{"maximum", map[string]string{"X-OpenStack-Ironic-API-Version": "1.115"}, 115, false},
		{"zero", map[string]string{"X-OpenStack-Ironic-API-Version": "1.0"}, 0, true},
		{"major 2", map[string]string{"X-OpenStack-Ironic-API-Version": "2.1"}, 0, true},
		{"banana", map[string]string{"X-OpenStack-Ironic-API-Version": "banana"}, 0, true},
		{"leading zero", map[string]string{"X-OpenStack-Ironic-API-Version": "1.01"}, 0, true},
		{"negative", map[string]string{"X-OpenStack-Ironic-API-Version": "1.-5"}, 0, true},
		{"trailing junk", map[string]string{"X-OpenStack-Ironic-API-Version": "1.5x"}, 0, true},
		{"empty minor", map[string]string{"X-OpenStack-Ironic-API-Version": "1."}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			got, err := parseMicroversion(h)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func FuzzParseMicroversion(f *testing.F) {
	for _, s := range []string{"1.1", "1.95", "latest", "banana", "1.999999", "baremetal 1.82", " 1.5 ", "1.", ".1"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, legacy, modern string) {
		h := http.Header{}
		h.Set("X-OpenStack-Ironic-API-Version", legacy)
		h.Set("OpenStack-API-Version", modern)
		got, err := parseMicroversion(h)
		if err == nil && (got < MinMinor || got > MaxMinor) {
			t.Fatalf("accepted out-of-range version %d from %q / %q", got, legacy, modern)
		}
		if err != nil && got != 0 {
			t.Fatalf("error with non-zero version %d", got)
		}
	})
}
