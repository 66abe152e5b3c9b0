package netconf

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// WriteResolvConf writes a resolv.conf naming servers (deduplicated, at most
// the three the C library reads) and search domains, replacing the file
// atomically. path "" is /etc/resolv.conf.
func WriteResolvConf(path string, servers []netip.Addr, search []string) error {
	if path == "" {
		path = "/etc/resolv.conf"
	}
	var b strings.Builder
	b.WriteString("# written by kiln-agent\n")
	var seen []netip.Addr
	for _, s := range servers {
		if !s.IsValid() || slices.Contains(seen, s) {
			continue
		}
		seen = append(seen, s)
		if len(seen) <= 3 {
			fmt.Fprintf(&b, "nameserver %s\n", s)
		}
	}
	var domains []string
	for _, d := range search {
		if d = strings.TrimSuffix(strings.TrimSpace(d), "."); d != "" && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	if len(domains) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(domains, " "))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".kiln-tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
