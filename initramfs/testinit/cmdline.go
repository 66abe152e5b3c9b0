package main

import (
	"net"
	"strings"
)

// parseCmdline splits a kernel command line into key=value pairs; a bare
// word maps to "". Later duplicates win, as for the kernel's own parameters.
func parseCmdline(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = strings.Trim(v, `"`)
	}
	return m
}

// bootifMAC parses PXELINUX's BOOTIF form, "01-aa-bb-cc-dd-ee-ff" (ARP type
// 1, ethernet), as iPXE and Ironic pass it.
func bootifMAC(s string) (net.HardwareAddr, bool) {
	rest, ok := strings.CutPrefix(s, "01-")
	if !ok {
		return nil, false
	}
	mac, err := net.ParseMAC(strings.ReplaceAll(rest, "-", ":"))
	if err != nil || len(mac) != 6 {
		return nil, false
	}
	return mac, true
}

// memSummary picks MemTotal and MemAvailable out of /proc/meminfo.
func memSummary(meminfo string) string {
	var out []string
	for _, l := range strings.Split(meminfo, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "MemTotal" || k == "MemAvailable") {
			out = append(out, k+"="+strings.Join(strings.Fields(v), ""))
		}
	}
	return strings.Join(out, " ")
}
