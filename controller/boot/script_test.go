package boot

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestRenderScriptGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		p      ScriptParams
	}{
		{"agent.ipxe", ScriptParams{
			Mode:       ModeAgent,
			KernelURL:  "http://10.0.0.1:6385/boot/files/kiln-agent.kernel",
			RamdiskURL: "http://10.0.0.1:6385/boot/files/kiln-agent.initramfs",
			APIURL:     "http://10.0.0.1:6385",
			MAC:        "aa:bb:cc:dd:ee:ff",
			Console:    "ttyS0,115200n8",
			ExtraArgs:  []string{"ipa-insecure=1", "nofb"},
		}},
		{"agent-minimal.ipxe", ScriptParams{
			Mode:       ModeAgent,
			KernelURL:  "http://h/k",
			RamdiskURL: "http://h/r",
		}},
		{"localboot.ipxe", ScriptParams{Mode: ModeLocal, MAC: "52:54:00:12:34:56"}},
		{"unknown-mode.ipxe", ScriptParams{Mode: "bogus", MAC: "52:54:00:12:34:56", KernelURL: "http://h/k"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			got := RenderScript(tc.p)
			checkGolden(t, tc.golden, got)
		})
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if got != string(want) {
		t.Errorf("script differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestParseMAC(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"aa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff", true},
		{"AA:BB:CC:DD:EE:FF", "aa:bb:cc:dd:ee:ff", true},
		{"52-54-00-12-34-56", "52:54:00:12:34:56", true},
		{"aabb.ccdd.eeff", "", false}, // valid for net.ParseMAC, not an iPXE form
		{"aa:bb:cc:dd:ee", "", false},
		{"aa:bb:cc:dd:ee:gg", "", false},
		{"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", "", false},
		{"${net0/mac}", "", false},
		{"", "", false},
	} {
		got, err := ParseMAC(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMAC(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestBootIF(t *testing.T) {
	if got := BootIF("AA:bb:cc:dd:ee:ff"); got != "01-aa-bb-cc-dd-ee-ff" {
		t.Errorf("BootIF = %q", got)
	}
}

func TestCheckArg(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"ipa-api-url=http://10.0.0.1:6385", true},
		{"console=ttyS0,115200n8", true},
		{"a b", false},
		{"a\nchain http://evil/", false},
		{"x=${net0/ip}", false},
		{"tab\tx", false},
	} {
		if err := CheckArg(tc.in); (err == nil) != tc.ok {
			t.Errorf("CheckArg(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"aa:bb:cc:dd:ee:ff", "52-54-00-12-34-56", "", "zz:zz", "aa:bb:cc:dd:ee:ff:00:11"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mac, err := ParseMAC(s)
		if err != nil {
			return
		}
		// Anything accepted is canonical and safe to put in a script.
		if again, err := ParseMAC(mac); err != nil || again != mac {
			t.Fatalf("ParseMAC(%q) = %q, not canonical (%q, %v)", s, mac, again, err)
		}
		if err := CheckArg("BOOTIF=" + BootIF(mac)); err != nil {
			t.Fatal(err)
		}
	})
}
