package agent

import (
	"bytes"
	"flag"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCmdline(t *testing.T) {
	def := DefaultConfig()
	for _, c := range []struct {
		name    string
		cmdline string
		want    func(*Config)
		warn    string
	}{
		{"empty", "", func(*Config) {}, ""},
		{"typical PXE", `BOOT_IMAGE=vmlinuz initrd=ramdisk ipa-api-url=http://10.0.0.1:6385/ BOOTIF=01-52-54-00-12-34-56 console=ttyS0`,
			func(c *Config) { c.APIURL = "http://10.0.0.1:6385"; c.BootIF = "52:54:00:12:34:56" }, ""},
		{"colon BOOTIF, upper case", "BOOTIF=52:54:00:AB:CD:EF", func(c *Config) { c.BootIF = "52:54:00:ab:cd:ef" }, ""},
		{"vmedia token and inspection",
			`ipa-agent-token=abc ipa-inspection-callback-url=https://c:6385/v1/continue_inspection ipa-inspection-collectors=default,logs ipa-collect-lldp=1`,
			func(c *Config) {
				c.AgentToken = "abc"
				c.InspectionCallbackURL = "https://c:6385/v1/continue_inspection"
				c.InspectionCollectors = []string{"default", "logs"}
				c.CollectLLDP = true
			}, ""},
		{"ports, hosts, timeout", `ipa-insecure=True ipa-listen-port=8999 ipa-advertise-host=[fd00::2] ipa-lookup-timeout=30 ipa-enable-auto-tls=false`,
			func(c *Config) {
				c.Insecure = true
				c.ListenPort = 8999
				c.AdvertiseHost = "fd00::2"
				c.LookupTimeout = 30 * time.Second
				c.AutoTLS = false
			}, ""},
		{"quoted value", `ipa-inspection-collectors="default, logs" quiet`, func(c *Config) { c.InspectionCollectors = []string{"default", "logs"} }, ""},
		{"unknown ignored", "foo=bar ipa-unknown=1 novalue", func(*Config) {}, ""},
		{"bad port", "ipa-listen-port=99999", func(*Config) {}, "ipa-listen-port"},
		{"bad bool", "ipa-insecure=maybe", func(*Config) {}, "ipa-insecure"},
		{"bad url", "ipa-api-url=mdns", func(*Config) {}, "ipa-api-url"},
		{"bad bootif", "BOOTIF=01-zz", func(*Config) {}, "BOOTIF"},
		{"bad timeout", "ipa-lookup-timeout=-5", func(*Config) {}, "ipa-lookup-timeout"},
		{"bad advertise host", "ipa-advertise-host=a/b", func(*Config) {}, "ipa-advertise-host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			got := DefaultConfig()
			ParseCmdline(&got, c.cmdline, slog.New(slog.NewTextHandler(&logs, nil)))
			want := def
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
			if c.warn == "" && logs.Len() != 0 {
				t.Fatalf("unexpected log: %s", logs.String())
			}
			if c.warn != "" && !strings.Contains(logs.String(), "param="+c.warn) {
				t.Fatalf("no warning about %s: %q", c.warn, logs.String())
			}
		})
	}
}

func TestSplitCmdline(t *testing.T) {
	got := SplitCmdline(" a=1  b=\"x y\"\tc \"d e\"=f\n")
	want := []string{"a=1", "b=x y", "c", "d e=f"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q", got)
	}
}

func TestFlagsOverrideCmdline(t *testing.T) {
	c := DefaultConfig()
	ParseCmdline(&c, "ipa-api-url=http://a:1 ipa-listen-port=8000", nil)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--api-url=http://b:2", "--allow-device=/dev/loop3", "--allow-device", "/dev/loop4", "--bootif=01-aa-bb-cc-dd-ee-ff"}); err != nil {
		t.Fatal(err)
	}
	if c.APIURL != "http://b:2" || c.ListenPort != 8000 || c.BootIF != "aa:bb:cc:dd:ee:ff" ||
		!reflect.DeepEqual(c.AllowDevices, []string{"/dev/loop3", "/dev/loop4"}) {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Ramdisk = "sometimes"
	if err := c.Validate(); err == nil {
		t.Fatal("bad --ramdisk accepted")
	}
	if err := (&Config{Ramdisk: "auto"}).Validate(); err == nil {
		t.Fatal("no controller accepted")
	}
}

func TestNetworkAndIPArg(t *testing.T) {
	c := DefaultConfig()
	if c.Network != "auto" {
		t.Fatalf("default --network %q, want auto", c.Network)
	}
	ParseCmdline(&c, "ipa-api-url=http://a:1 ip=10.0.0.5::10.0.0.1:255.255.255.0::eth0:off", nil)
	if c.IPArg != "10.0.0.5::10.0.0.1:255.255.255.0::eth0:off" {
		t.Fatalf("ip= not kept: %q", c.IPArg)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--network=false", "--ip=dhcp"}); err != nil {
		t.Fatal(err)
	}
	if c.Network != "false" || c.IPArg != "dhcp" {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Network = "maybe"
	if err := c.Validate(); err == nil {
		t.Fatal("bad --network accepted")
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add(`ipa-api-url=http://10.0.0.1:6385 BOOTIF=01-52-54-00-12-34-56 ipa-lookup-timeout=1e3`)
	f.Add(`ipa-inspection-collectors="a,b" ipa-listen-port=0 ipa-advertise-host=[::1] ipa-insecure=yes`)
	f.Add("BOOTIF=\"01-\x00 ipa-agent-token=")
	f.Fuzz(func(t *testing.T, s string) {
		c := DefaultConfig()
		ParseCmdline(&c, s, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
		if c.ListenPort < 1 || c.ListenPort > 65535 || c.LookupTimeout < 0 {
			t.Fatalf("invalid config accepted: %+v", c)
		}
		if c.BootIF != "" {
			if m, err := ParseBootIF(c.BootIF); err != nil || m != c.BootIF {
				t.Fatalf("BOOTIF %q not normalized", c.BootIF)
			}
		}
	})
}
