package hints

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
)

const gib = int64(1) << 30

// fixture is a machine with a SATA SSD, a SAS disk behind a RAID
// controller, an NVMe drive, a small virtio disk and a USB stick.
var fixture = []disk.Device{
	{Name: "/dev/sda", Model: "Samsung SSD 860", Vendor: "ATA", Serial: "S3Z9NB0K", Size: 500 * gib,
		WWN: "0x5002538e40a1b2c3", WWNWithExtension: "0x5002538e40a1b2c3", HCTL: "0:0:0:0", Tran: "sata",
		ByPath: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"},
	{Name: "/dev/sdb", Model: "ST2000NM0045", Vendor: "SEAGATE", Serial: "ZC1B2C3D4E", Size: 2000*gib + 12345, Rotational: true,
		WWN: "0x600508b1001c3a5e", WWNWithExtension: "0x600508b1001c3a5e2b5f31ff8b7d1e4a", WWNVendorExtension: "0x2b5f31ff8b7d1e4a",
		HCTL: "1:0:0:0", Tran: "sas", ByPath: "/dev/disk/by-path/pci-0000:00:02.0-sas-0x5000c500a1b2c3d4-lun-0"},
	{Name: "/dev/nvme0n1", Model: "Samsung SSD 970 EVO Plus 1TB", Serial: "S4EWNX0R123456", Size: 1024 * gib,
		WWN: "eui.0025388b91b00e41", WWNWithExtension: "eui.0025388b91b00e41", Tran: "nvme"},
	{Name: "/dev/vda", Serial: "vda-serial", Size: 3 * gib, Rotational: true, Tran: "virtio"},
	{Name: "/dev/sdc", Model: "Ultra Fit", Vendor: "SanDisk", Size: 16 * gib, Rotational: true, HCTL: "6:0:0:0", Tran: "usb"},
}

func TestSelectRoot(t *testing.T) {
	cases := []struct {
		name  string
		hints string // JSON, as Ironic stores it
		skip  []string
		want  string // device name, or "" for an error
	}{
		{"no hints: smallest >= 4 GiB", `{}`, nil, "/dev/sdc"},
		{"no hints, skip list", `{}`, []string{"sdc"}, "/dev/sda"},
		{"name default op", `{"name": "/dev/sdb"}`, nil, "/dev/sdb"},
		{"name without /dev/", `{"name": "nvme0n1"}`, nil, "/dev/nvme0n1"},
		{"name s==", `{"name": "s== /dev/sda"}`, nil, "/dev/sda"},
		{"name s!=", `{"name": "s!= /dev/nvme0n1", "rotational": false}`, nil, "/dev/sda"},
		{"name <or>", `{"name": "<or> /dev/vdz <or> /dev/sdc"}`, nil, "/dev/sdc"},
		{"name in skip list", `{"name": "/dev/sda"}`, []string{"/dev/sda"}, ""},
		{"serial exact, case-insensitive", `{"serial": "s3z9nb0k"}`, nil, "/dev/sda"},
		{"serial number as JSON number fails cleanly", `{"serial": 12345}`, nil, ""},
		{"serial s== BMO form", `{"serial": "s== ZC1B2C3D4E"}`, nil, "/dev/sdb"},
		{"model <in> with space", `{"model": "<in> 970 evo"}`, nil, "/dev/nvme0n1"},
		{"model <in> first match in name order", `{"model": "<in> samsung"}`, nil, "/dev/nvme0n1"},
		{"model <all-in>", `{"model": "<all-in> samsung <all-in> 860"}`, nil, "/dev/sda"},
		{"model <all-in> one word missing", `{"model": "<all-in> samsung <all-in> 999"}`, nil, ""},
		{"vendor <in>", `{"vendor": "<in> seag"}`, nil, "/dev/sdb"},
		{"vendor s<", `{"vendor": "s< b"}`, nil, "/dev/sda"},
		{"vendor s<=", `{"vendor": "s<= ata"}`, nil, "/dev/sda"},
		{"vendor s>", `{"vendor": "s> sandisk"}`, nil, "/dev/sdb"},
		{"vendor s>=", `{"vendor": "s>= sandisk", "rotational": true, "size": "<= 100"}`, nil, "/dev/sdc"},
		{"wwn", `{"wwn": "0x600508B1001C3A5E"}`, nil, "/dev/sdb"},
		{"wwn_with_extension", `{"wwn_with_extension": "s== 0x600508b1001c3a5e2b5f31ff8b7d1e4a"}`, nil, "/dev/sdb"},
		{"wwn_vendor_extension", `{"wwn_vendor_extension": "0x2b5f31ff8b7d1e4a"}`, nil, "/dev/sdb"},
		{"wwn eui", `{"wwn": "eui.0025388b91b00e41"}`, nil, "/dev/nvme0n1"},
		{"hctl", `{"hctl": "1:0:0:0"}`, nil, "/dev/sdb"},
		{"hctl <or>", `{"hctl": "<or> 9:0:0:0 <or> 6:0:0:0"}`, nil, "/dev/sdc"},
		{"by_path", `{"by_path": "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"}`, nil, "/dev/sda"},
		{"tran", `{"tran": "nvme"}`, nil, "/dev/nvme0n1"},
		{"tran s!= with size", `{"tran": "s!= sata", "size": 16}`, nil, "/dev/sdc"},
		{"size int", `{"size": 1024}`, nil, "/dev/nvme0n1"},
		{"size float from JSON", `{"size": 500.0}`, nil, "/dev/sda"},
		{"size string default ==", `{"size": "2000"}`, nil, "/dev/sdb"},
		{"size ==", `{"size": "== 3"}`, nil, "/dev/vda"},
		{"size !=", `{"size": "!= 500", "tran": "<in> sa"}`, nil, "/dev/sdb"},
		{"size >=", `{"size": ">= 1000"}`, nil, "/dev/nvme0n1"},
		{"size <=", `{"size": "<= 3"}`, nil, "/dev/vda"},
		{"size = means at least", `{"size": "= 1500"}`, nil, "/dev/sdb"},
		{"size <or>", `{"size": "<or> 16 <or> 3"}`, nil, "/dev/sdc"},
		{"size matches nothing", `{"size": ">= 5000"}`, nil, ""},
		{"rotational bool", `{"rotational": true, "size": ">= 100"}`, nil, "/dev/sdb"},
		{"rotational string", `{"rotational": "false", "size": "<= 600"}`, nil, "/dev/sda"},
		{"rotational 0/1", `{"rotational": 0, "tran": "nvme"}`, nil, "/dev/nvme0n1"},
		{"all hints must match", `{"model": "<in> samsung", "rotational": true}`, nil, ""},
		{"missing property never matches", `{"by_path": "<in> nvme"}`, nil, ""},
		{"serial with slash and space quoted", `{"serial": "vdb serial/x"}`, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(c.hints), &m); err != nil {
				t.Fatal(err)
			}
			hs, err := ParseHints(m)
			if err != nil {
				t.Fatalf("ParseHints: %v", err)
			}
			got, err := SelectRoot(fixture, hs, c.skip)
			if c.want == "" {
				if err == nil {
					t.Fatalf("selected %s, want an error", got.Name)
				}
				return
			}
			if err != nil {
				t.Fatalf("SelectRoot: %v", err)
			}
			if got.Name != c.want {
				t.Fatalf("selected %s, want %s", got.Name, c.want)
			}
		})
	}
}

func TestSelectRootQuotedValues(t *testing.T) {
	devs := []disk.Device{{Name: "/dev/vdb", Serial: "vdb serial/x", Size: 8 * gib}}
	hs, err := ParseHints(map[string]any{"serial": "VDB Serial/X"})
	if err != nil {
		t.Fatal(err)
	}
	if got := hs.String(); got != "{serial: s== vdb%20serial/x}" {
		t.Errorf("normalised = %s", got)
	}
	if d, err := SelectRoot(devs, hs, nil); err != nil || d.Name != "/dev/vdb" {
		t.Fatalf("got %v, %v", d.Name, err)
	}
}

func TestSelectRootErrorNamesHintsAndCandidates(t *testing.T) {
	hs, err := ParseHints(map[string]any{"model": "<in> intel", "size": ">= 100"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = SelectRoot(fixture, hs, []string{"/dev/sdc"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"model: <in> intel", "size: >= 100", `/dev/sda (model "Samsung SSD 860"): fails model: <in> intel`,
		"/dev/vda (model unknown)", "/dev/sdc: in skip_block_devices"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	_, err = SelectRoot(nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no block devices") {
		t.Errorf("empty device list: %v", err)
	}
	_, err = SelectRoot([]disk.Device{{Name: "/dev/vda", Size: 2 * gib}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "smaller than 4 GiB") {
		t.Errorf("only small disks: %v", err)
	}
}

func TestSelectRootDefaultTieBreaksByName(t *testing.T) {
	devs := []disk.Device{{Name: "/dev/sdb", Size: 10 * gib}, {Name: "/dev/sda", Size: 10 * gib}, {Name: "/dev/sdc", Size: 20 * gib}}
	d, err := SelectRoot(devs, nil, nil)
	if err != nil || d.Name != "/dev/sda" {
		t.Fatalf("got %s, %v; want /dev/sda", d.Name, err)
	}
}

func TestParseHintsErrors(t *testing.T) {
	cases := []struct {
		hints string
		want  string
	}{
		{`{"colour": "red"}`, `unknown hint "colour"`},
		{`{"size": "s== 10"}`, "does not apply to size"},
		{`{"size": 0}`, "not a positive integer"},
		{`{"size": -5}`, "not a positive integer"},
		{`{"size": 1.5}`, "not an integer"},
		{`{"size": ">= ten"}`, "not a positive integer"},
		{`{"size": true}`, "not a number"},
		{`{"model": ">= 10"}`, "does not apply to strings"},
		{`{"model": ""}`, "expression is empty"},
		{`{"model": "<in>"}`, "without a value"},
		{`{"model": "s== a s== b"}`, "takes one value"},
		{`{"model": ["a"]}`, "is not a string"},
		{`{"model": null}`, "is not a string"},
		{`{"rotational": "maybe"}`, "not a boolean"},
		{`{"rotational": 2}`, "not a boolean"},
	}
	for _, c := range cases {
		var m map[string]any
		if err := json.Unmarshal([]byte(c.hints), &m); err != nil {
			t.Fatal(err)
		}
		_, err := ParseHints(m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseHints(%s) err = %v, want it to contain %q", c.hints, err, c.want)
		}
	}
}

func TestParseHintsFromSysfsFixture(t *testing.T) {
	devs, err := disk.Enumerate("../testdata/sys", disk.EnumerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ hints, want string }{
		{`{"wwn_vendor_extension": "s== 0x2b5f31ff8b7d1e4a"}`, "/dev/sdb"},
		{`{"by_path": "<in> nvme"}`, "/dev/nvme0n1"},
		{`{}`, "/dev/vdb"},
		{`{"tran": "usb"}`, "/dev/sdc"},
		{`{"hctl": "0:0:0:0", "rotational": true}`, "/dev/sda"},
	} {
		var m map[string]any
		json.Unmarshal([]byte(c.hints), &m)
		hs, err := ParseHints(m)
		if err != nil {
			t.Fatal(err)
		}
		d, err := SelectRoot(devs, hs, nil)
		if err != nil || d.Name != c.want {
			t.Errorf("%s: got %s, %v; want %s", c.hints, d.Name, err, c.want)
		}
	}
}

var (
	normalRE = regexp.MustCompile(`^([a-z0-9_.~/-]|%[0-9A-F]{2})+$`)
	sizeRE   = regexp.MustCompile(`^[1-9][0-9]*$`)
)

func FuzzParseHints(f *testing.F) {
	for _, s := range []string{
		`{"size": ">= 100", "model": "<in> samsung", "rotational": "true"}`,
		`{"name": "s== /dev/sda", "serial": "<or> a <or> b"}`,
		`{"model": "<all-in> x <all-in> y", "size": 10}`,
		`{"wwn": "0x5000", "hctl": "s!= 0:0:0:0", "vendor": "s>= a"}`,
		`{"size": "<or> 1 <or> 2", "tran": "s<= z"}`,
		`{"by_path": "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil {
			return
		}
		hs, err := ParseHints(m)
		if err != nil {
			return
		}
		// Values are normalised: sizes are decimal integers, strings are
		// lower-case and URL-quoted (no spaces or operators left inside).
		for _, h := range hs {
			for _, v := range h.Values {
				if !normalRE.MatchString(v) || (h.Key == "size" && !sizeRE.MatchString(v)) {
					t.Fatalf("%s: value %q not normalised", h, v)
				}
			}
			if h.Key != "rotational" && len(h.Values) == 0 {
				t.Fatalf("%s: no values", h)
			}
		}
		if again, _ := ParseHints(m); again.String() != hs.String() {
			t.Fatalf("parse not deterministic: %s then %s", hs, again)
		}
		for _, d := range fixture {
			hs.Match(d)
		}
		SelectRoot(fixture, hs, nil)
	})
}
