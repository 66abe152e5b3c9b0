package main

import "testing"

func TestParseCmdline(t *testing.T) {
	m := parseCmdline("console=ttyS0 quiet BOOTIF=01-52-54-00-12-34-56 ipa-api-url=http://10.0.2.2:1/ kiln.testurl=\"http://h/x?a=b\"\n")
	for k, want := range map[string]string{
		"console": "ttyS0", "quiet": "", "BOOTIF": "01-52-54-00-12-34-56",
		"ipa-api-url": "http://10.0.2.2:1/", "kiln.testurl": "http://h/x?a=b",
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, want)
		}
	}
}

func TestBootifMAC(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"01-52-54-00-12-34-56", "52:54:00:12:34:56", true},
		{"01-AA-BB-CC-DD-EE-FF", "aa:bb:cc:dd:ee:ff", true},
		{"52-54-00-12-34-56", "", false},
		{"01-52-54-00-12-34", "", false},
		{"", "", false},
	} {
		mac, ok := bootifMAC(tc.in)
		if ok != tc.ok || (ok && mac.String() != tc.want) {
			t.Errorf("bootifMAC(%q) = %v, %v; want %s, %v", tc.in, mac, ok, tc.want, tc.ok)
		}
	}
}

func TestMemSummary(t *testing.T) {
	in := "MemTotal:         496084 kB\nMemFree:          420000 kB\nMemAvailable:     430000 kB\n"
	if got, want := memSummary(in), "MemTotal=496084kB MemAvailable=430000kB"; got != want {
		t.Errorf("memSummary = %q, want %q", got, want)
	}
}
