//go:build linux

// Command testinit stands in for kiln-agent in the initramfs boot tests: it is
// the program u-root's init starts, and it proves the pieces the real agent
// relies on work in the built image — the kernel modules load in order, the
// NIC comes up with DHCP, and HTTP reaches the controller.
//
// It prints Marker on the console, loads the modules (modload.Dir), picks the
// NIC named by BOOTIF= (else the first ethernet link), runs DHCP on it, GETs
// the URL in kiln.testurl= (else ipa-api-url=) and prints "FETCH <status>
// <first line of body>". With kiln.poweroff on the kernel command line it then
// powers the machine off; otherwise it returns and u-root's init starts the
// shell on the console.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/initramfs/modload"
)

// Marker is the line the boot tests look for on the serial console.
const Marker = "KILN-TESTINIT-UP"

func main() {
	fmt.Println(Marker)
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	raw, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		log.Error("read kernel command line", "err", err)
	}
	args := parseCmdline(string(raw))
	// What the boot script passed, for the tests to check.
	fmt.Printf("ARGS BOOTIF=%s ipa-api-url=%s\n", args["BOOTIF"], args["ipa-api-url"])
	// A safety net below the boot tests' own limit (12 minutes), so that a
	// stuck boot still says here what it waited for. Not a measurement: at
	// load 40 on two cores loading the modules under TCG alone took over 2
	// minutes, and the former 2-minute limit failed boots that were merely slow.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err = run(ctx, log, args)
	cancel()
	if err != nil {
		fmt.Println("TESTINIT FAILED:", err)
	} else {
		fmt.Println("TESTINIT DONE")
	}
	if _, ok := args["kiln.poweroff"]; ok {
		unix.Sync()
		if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
			log.Error("power off", "err", err)
		}
		// PID 1's children must not exit into a panic; idle instead.
		for {
			time.Sleep(time.Hour)
		}
	}
}

func run(ctx context.Context, log *slog.Logger, args map[string]string) error {
	start := time.Now()
	loaded, err := modload.Load(ctx, log, modload.Dir, nil)
	log.Info("modules", "loaded", len(loaded), "took", time.Since(start).Round(time.Millisecond), "err", err)

	link, err := pickLink(ctx, args["BOOTIF"])
	if err != nil {
		return err
	}
	if err := dhcp(ctx, log, link); err != nil {
		return err
	}
	url := args["kiln.testurl"]
	if url == "" {
		url = args["ipa-api-url"]
	}
	if url == "" {
		return fmt.Errorf("no kiln.testurl= or ipa-api-url= on the kernel command line")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	fmt.Printf("FETCH %d %s\n", resp.StatusCode, strings.TrimSpace(line))
	if mem, err := os.ReadFile("/proc/meminfo"); err == nil {
		// For the memory budget: what the image and its modules leave free.
		fmt.Printf("MEM %s\n", memSummary(string(mem)))
	}
	return nil
}

// pickLink waits for the NIC whose MAC BOOTIF names (01-aa-bb-…), or with no
// BOOTIF the first ethernet link, to appear: drivers probe asynchronously.
func pickLink(ctx context.Context, bootif string) (netlink.Link, error) {
	want, hasWant := bootifMAC(bootif)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			a := l.Attrs()
			if a.EncapType != "ether" || len(a.HardwareAddr) != 6 {
				continue
			}
			if !hasWant || a.HardwareAddr.String() == want.String() {
				return l, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for NIC (BOOTIF=%q): %w", bootif, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func dhcp(ctx context.Context, log *slog.Logger, link netlink.Link) error {
	name := link.Attrs().Name
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	if lo, err := netlink.LinkByName("lo"); err == nil {
		_ = netlink.LinkSetUp(lo)
	}
	// Retried until ctx ends: on a loaded host QEMU's DHCP server may miss
	// a few 3-second windows.
	c, err := nclient4.New(name, nclient4.WithTimeout(3*time.Second), nclient4.WithRetry(200))
	if err != nil {
		return fmt.Errorf("dhcp on %s: %w", name, err)
	}
	defer c.Close()
	lease, err := c.Request(ctx)
	if err != nil {
		return fmt.Errorf("dhcp on %s: %w", name, err)
	}
	ack := lease.ACK
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ack.YourIPAddr.DefaultMask()
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ack.YourIPAddr, Mask: mask}}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("add %s to %s: %w", addr, name, err)
	}
	if gw := ack.Router(); len(gw) > 0 {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw[0]}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("default route via %s: %w", gw[0], err)
		}
	}
	fmt.Printf("DHCP %s %s\n", name, addr.IPNet)
	log.Info("dhcp lease", "link", name, "addr", addr.IPNet.String(), "server", ack.ServerIdentifier())
	return nil
}
