package agent

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/agent/steps"
)

// Config is the agent's configuration. It comes from the kernel command line
// (IPA's parameter names) and may be overridden by flags.
type Config struct {
	// APIURL is the controller's base URL (ipa-api-url), e.g. http://10.0.0.1:6385.
	APIURL string
	// BootIF is the MAC the machine booted from (BOOTIF), normalized aa:bb:….
	BootIF string
	// AgentToken is a pre-generated token (ipa-agent-token, virtual media).
	AgentToken string
	// NodeUUID, when known in advance, is sent with the lookup.
	NodeUUID string
	// InspectionCallbackURL (ipa-inspection-callback-url) turns on inspection.
	InspectionCallbackURL string
	// InspectionCollectors (ipa-inspection-collectors, comma-separated).
	InspectionCollectors []string
	// CollectLLDP (ipa-collect-lldp).
	CollectLLDP bool
	// Insecure skips TLS verification of the controller (ipa-insecure).
	Insecure bool
	// CAFile is a PEM bundle of the CAs that may sign the controller's
	// certificate: IPA's cafile option, given on the kernel command line as
	// ipa-cafile. Without it the agent trusts DefaultCAFile when the boot
	// media carry one, else the system's CAs.
	CAFile string
	// ListenHost and ListenPort (ipa-listen-port) are where the command API listens.
	ListenHost string
	ListenPort int
	// AdvertiseHost (ipa-advertise-host) replaces the auto-detected address
	// in callback_url; AdvertisePort defaults to ListenPort.
	AdvertiseHost string
	AdvertisePort int
	// LookupTimeout (ipa-lookup-timeout) bounds the lookup retries.
	LookupTimeout time.Duration
	// AutoTLS (ipa-enable-auto-tls) serves the command API over HTTPS with a
	// self-signed certificate sent as agent_verify_ca.
	AutoTLS bool
	// PluginDir holds executable step plugins.
	PluginDir string
	// AllowDevices are devices destructive steps may touch outside a ramdisk.
	AllowDevices []string
	// Ramdisk forces ramdisk detection: "auto" (default), "true" or "false".
	Ramdisk string
	// ExtraMACs are added to the lookup (for running outside a ramdisk).
	ExtraMACs []string
	// Network says whether the agent configures the network itself (links
	// up, DHCP or ip=): "auto" (default: only inside a ramdisk), "true" or
	// "false". On a workstation the network is already up.
	Network string
	// IPArg is the kernel's ip= argument ("" when absent), for the network
	// bring-up.
	IPArg string
}

// DefaultConfig returns IPA's defaults.
func DefaultConfig() Config {
	return Config{
		ListenPort:    9999,
		LookupTimeout: 600 * time.Second,
		AutoTLS:       true,
		PluginDir:     steps.DefaultPluginDir,
		Ramdisk:       "auto",
		Network:       "auto",
	}
}

// SplitCmdline splits a kernel command line into words, honouring double
// quotes the way the kernel does (key="a b" is one word, quotes removed).
func SplitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// ParseCmdline applies the kernel command line cmdline to c. Unknown words are
// ignored; a malformed value of a known parameter is logged and skipped, never
// fatal: the agent must come up even with a typo in a boot entry.
func ParseCmdline(c *Config, cmdline string, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	bad := func(key, val string, err error) {
		log.Warn("ignoring malformed kernel parameter", "param", key, "value", val, "err", err)
	}
	for _, w := range SplitCmdline(cmdline) {
		key, val, hasVal := strings.Cut(w, "=")
		if !hasVal {
			continue
		}
		switch key {
		case "ipa-api-url":
			if err := checkURL(val); err != nil {
				bad(key, val, err)
				continue
			}
			c.APIURL = strings.TrimRight(val, "/")
		case "BOOTIF":
			mac, err := ParseBootIF(val)
			if err != nil {
				bad(key, val, err)
				continue
			}
			c.BootIF = mac
		case "ipa-agent-token":
			c.AgentToken = val
		case "ipa-node-uuid":
			c.NodeUUID = val
		case "ipa-inspection-callback-url":
			if err := checkURL(val); err != nil {
				bad(key, val, err)
				continue
			}
			c.InspectionCallbackURL = val
		case "ipa-inspection-collectors":
			c.InspectionCollectors = splitList(val)
		case "ipa-collect-lldp":
			setBool(&c.CollectLLDP, key, val, bad)
		case "ipa-insecure":
			setBool(&c.Insecure, key, val, bad)
		case "ipa-cafile":
			c.CAFile = val
		case "ipa-enable-auto-tls":
			setBool(&c.AutoTLS, key, val, bad)
		case "ipa-listen-port":
			setPort(&c.ListenPort, key, val, bad)
		case "ipa-advertise-port":
			setPort(&c.AdvertisePort, key, val, bad)
		case "ipa-listen-host":
			if val != "" && net.ParseIP(val) == nil {
				bad(key, val, fmt.Errorf("not an IP address"))
				continue
			}
			c.ListenHost = val
		case "ipa-advertise-host":
			if err := checkHost(val); err != nil {
				bad(key, val, err)
				continue
			}
			c.AdvertiseHost = strings.Trim(val, "[]")
		case "ipa-lookup-timeout":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f < 0 || f > 1e7 {
				bad(key, val, fmt.Errorf("want seconds ≥ 0"))
				continue
			}
			c.LookupTimeout = time.Duration(f * float64(time.Second))
		case "kiln-plugin-dir":
			c.PluginDir = val
		case "ip":
			c.IPArg = val
		}
	}
}

// ParseBootIF normalizes BOOTIF: "01-aa-bb-cc-dd-ee-ff" (pxelinux/iPXE form, the
// 01 is the ARP hardware type) or "aa:bb:cc:dd:ee:ff" → "aa:bb:cc:dd:ee:ff".
func ParseBootIF(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) == 20 && strings.HasPrefix(s, "01-") {
		s = s[3:]
	}
	s = strings.ReplaceAll(s, "-", ":")
	hw, err := net.ParseMAC(s)
	if err != nil {
		return "", fmt.Errorf("parse BOOTIF %q: %w", s, err)
	}
	if len(hw) != 6 {
		return "", fmt.Errorf("parse BOOTIF %q: not a 6-byte MAC", s)
	}
	return hw.String(), nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("want an http or https URL")
	}
	if u.Host == "" {
		return fmt.Errorf("URL has no host")
	}
	return nil
}

func checkHost(s string) error {
	h := strings.Trim(s, "[]")
	if h == "" {
		return fmt.Errorf("empty host")
	}
	if net.ParseIP(h) != nil {
		return nil
	}
	if strings.ContainsAny(h, "/:@ ") {
		return fmt.Errorf("not an IP address or host name")
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseBool accepts what oslo's bool_from_string accepts.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, nil
	case "0", "f", "false", "off", "n", "no":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean")
}

func setBool(dst *bool, key, val string, bad func(string, string, error)) {
	b, err := parseBool(val)
	if err != nil {
		bad(key, val, err)
		return
	}
	*dst = b
}

func setPort(dst *int, key, val string, bad func(string, string, error)) {
	n, err := strconv.Atoi(val)
	if err != nil || n < 1 || n > 65535 {
		bad(key, val, fmt.Errorf("want a port 1-65535"))
		return
	}
	*dst = n
}

// listFlag is a repeatable (and comma-accepting) string flag.
type listFlag struct{ dst *[]string }

func (l listFlag) String() string {
	if l.dst == nil {
		return ""
	}
	return strings.Join(*l.dst, ",")
}
func (l listFlag) Set(s string) error { *l.dst = append(*l.dst, splitList(s)...); return nil }

// RegisterFlags binds flags to c, with c's current values as defaults: parse
// the kernel command line first, then the flags, so flags win.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.APIURL, "api-url", c.APIURL, "controller base URL (ipa-api-url)")
	fs.Func("bootif", "MAC the machine booted from (BOOTIF)", func(s string) error {
		m, err := ParseBootIF(s)
		if err == nil {
			c.BootIF = m
		}
		return err
	})
	fs.StringVar(&c.AgentToken, "agent-token", c.AgentToken, "pre-generated agent token (ipa-agent-token)")
	fs.StringVar(&c.NodeUUID, "node-uuid", c.NodeUUID, "node UUID to send with the lookup")
	fs.StringVar(&c.InspectionCallbackURL, "inspection-callback-url", c.InspectionCallbackURL, "inspection callback URL (ipa-inspection-callback-url)")
	fs.Var(listFlag{&c.InspectionCollectors}, "inspection-collectors", "inspection collectors (ipa-inspection-collectors)")
	fs.BoolVar(&c.CollectLLDP, "collect-lldp", c.CollectLLDP, "collect LLDP (ipa-collect-lldp)")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "do not verify the controller's TLS certificate (ipa-insecure)")
	fs.StringVar(&c.CAFile, "cafile", c.CAFile, "PEM CA bundle that signed the controller's certificate (ipa-cafile; default "+DefaultCAFile+" when present)")
	fs.StringVar(&c.ListenHost, "listen-host", c.ListenHost, "address the command API listens on (all when empty)")
	fs.IntVar(&c.ListenPort, "listen-port", c.ListenPort, "command API port (ipa-listen-port)")
	fs.StringVar(&c.AdvertiseHost, "advertise-host", c.AdvertiseHost, "host in callback_url (ipa-advertise-host)")
	fs.IntVar(&c.AdvertisePort, "advertise-port", c.AdvertisePort, "port in callback_url (default: listen port)")
	fs.DurationVar(&c.LookupTimeout, "lookup-timeout", c.LookupTimeout, "give up the lookup after this long (ipa-lookup-timeout)")
	fs.BoolVar(&c.AutoTLS, "auto-tls", c.AutoTLS, "serve the command API over HTTPS with a self-signed certificate")
	fs.StringVar(&c.PluginDir, "plugin-dir", c.PluginDir, "directory of executable step plugins")
	fs.Var(listFlag{&c.AllowDevices}, "allow-device", "device destructive steps may touch outside a ramdisk (repeatable)")
	fs.StringVar(&c.Ramdisk, "ramdisk", c.Ramdisk, "running in a ramdisk: auto, true or false")
	fs.Var(listFlag{&c.ExtraMACs}, "lookup-mac", "extra MAC address to look up with (repeatable)")
	fs.StringVar(&c.Network, "network", c.Network, "configure the network (links, DHCP, ip=): auto (only in a ramdisk), true or false")
	fs.StringVar(&c.IPArg, "ip", c.IPArg, "the kernel's ip= argument for the network bring-up")
}

// Validate reports configuration the agent cannot run with.
func (c *Config) Validate() error {
	if c.APIURL == "" && c.InspectionCallbackURL == "" {
		return fmt.Errorf("no controller: set ipa-api-url (or --api-url)")
	}
	switch c.Ramdisk {
	case "auto", "true", "false":
	default:
		return fmt.Errorf("--ramdisk must be auto, true or false, not %q", c.Ramdisk)
	}
	switch c.Network {
	case "auto", "true", "false":
	default:
		return fmt.Errorf("--network must be auto, true or false, not %q", c.Network)
	}
	for _, m := range c.ExtraMACs {
		if _, err := net.ParseMAC(m); err != nil {
			return fmt.Errorf("--lookup-mac %q: %w", m, err)
		}
	}
	return nil
}

// LoadConfig builds the configuration: defaults, then the kernel command line
// read from cmdlinePath (unless "-" or missing), then args as flags. A
// --cmdline=PATH flag in args replaces cmdlinePath.
func LoadConfig(args []string, cmdlinePath string, readFile func(string) ([]byte, error), log *slog.Logger) (Config, error) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--cmdline="); ok {
			cmdlinePath = v
		} else if (a == "--cmdline" || a == "-cmdline") && i+1 < len(args) {
			cmdlinePath = args[i+1]
		}
	}
	c := DefaultConfig()
	if cmdlinePath != "" && cmdlinePath != "-" {
		b, err := readFile(cmdlinePath)
		if err != nil {
			log.Warn("cannot read the kernel command line; using flags only", "path", cmdlinePath, "err", err)
		} else {
			ParseCmdline(&c, string(b), log)
		}
	}
	fs := flag.NewFlagSet("kiln-agent", flag.ContinueOnError)
	fs.String("cmdline", cmdlinePath, "file holding the kernel command line (- for none)")
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("parse flags: %w", err)
	}
	return c, nil
}
