//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
)

// staticIP is the agent's address in TestStaticNetworkVirtualMedia: QEMU's
// DHCP server hands out 10.0.2.15 upwards, so .77 can only come from the
// network data.
const staticIP = "10.0.2.77"

// staticDoc is the NMState network data of the static-IP scenarios: the
// kernel calls the NIC eth0 (a ramdisk has no udev); the document calls it
// enp0s3, as the installed system would, and gives its MAC.
func staticDoc(mac string) string {
	return fmt.Sprintf(`interfaces:
- name: enp0s3
  type: ethernet
  state: up
  mac-address: "%s"
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: %s
      prefix-length: 24
  ipv6:
    enabled: false
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 10.0.2.2
    next-hop-interface: enp0s3
dns-resolver:
  config:
    server: [10.0.2.3]
`, mac, staticIP)
}

// inspectStatic inspects the node and checks that its agent configured the
// static address from the network data, without DHCP, and reached the
// controller with it.
func (l *lab) inspectStatic() {
	t := l.t
	t.Helper()
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	p := l.begin()
	l.provision("inspect", nil)
	l.waitState("manageable", 4*time.Minute, p)
	l.phaseTimings("inspect", p, time.Now())
	console := l.serialSince(p.ons)
	if !strings.Contains(console, "network configured from NMState network data") {
		t.Errorf("the agent did not report applying the network data")
	}
	if strings.Contains(console, `msg="network up"`) {
		t.Errorf("the agent fell back to DHCP")
	}
	if !strings.Contains(console, "link renamed to the network data's name") {
		t.Errorf("eth0 was not renamed to enp0s3 by its MAC")
	}
	var inv struct {
		Inventory struct {
			Interfaces []struct {
				Name string `json:"name"`
				MAC  string `json:"mac_address"`
				IPv4 string `json:"ipv4_address"`
			} `json:"interfaces"`
		} `json:"inventory"`
	}
	l.api("GET", "/v1/nodes/"+l.node+"/inventory", nil, &inv)
	found := false
	for _, i := range inv.Inventory.Interfaces {
		if strings.EqualFold(i.MAC, l.mac) {
			found = true
			if i.Name != "enp0s3" || i.IPv4 != staticIP {
				t.Errorf("inventory interface %+v: want enp0s3 with %s", i, staticIP)
			}
		}
	}
	if !found {
		t.Errorf("inventory interfaces %+v lack %s", inv.Inventory.Interfaces, l.mac)
	}
}

// TestStaticNetworkVirtualMedia is a host without DHCP as Metal3 enrols one:
// driver_info.preprovisioning_network_data (NMState, naming the NIC by its
// predictable name and MAC), boot over redfish-virtual-media with the ISO the
// controller builds. The agent must configure the static address before it
// can reach the controller at all; then the machine is inspected, deployed
// and boots its image.
func TestStaticNetworkVirtualMedia(t *testing.T) {
	t.Parallel()
	testtool.Need(t, "xorriso")
	l := newLab(t, "static", labOpts{uefi: true, guestIP: staticIP})
	defer l.summary()
	l.enrollWith("redfish-virtual-media", false, map[string]any{"preprovisioning_network_data": staticDoc(l.mac)})
	ons := l.vm.PowerOns()
	l.inspectStatic()
	if s := l.serialSince(ons); !strings.Contains(s, "boot order cd") {
		t.Errorf("the agent did not boot from the virtual CD (power-on lines: %q)", powerOnLines(s))
	}

	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	_, ons = l.deployImage("good.qcow2", "qcow2", sha256Of(t, "good.qcow2"), "active")
	l.checkBooted(ons, "good", time.Now())
	if m, _ := l.vm.Media(context.Background()); m.Inserted {
		t.Errorf("the agent ISO is still inserted after the deploy: %+v", m)
	}
}

// TestStaticNetworkIPXE: the same network data on a network-booted node.
// iPXE itself still takes a DHCP lease to load its script; the script then
// loads the node's own ramdisk (/boot/ramdisk/<node>, the initramfs with the
// document appended) and the agent uses the static address, not DHCP.
func TestStaticNetworkIPXE(t *testing.T) {
	t.Parallel()
	l := newLab(t, "static-ipxe", labOpts{guestIP: staticIP})
	defer l.summary()
	l.enrollWith("ipxe", false, map[string]any{"preprovisioning_network_data": staticDoc(l.mac)})
	l.inspectStatic()
	if !strings.Contains(l.kiln.Logs(), `msg="serving ramdisk with network data" node=`+l.node) {
		t.Errorf("the controller never served the node's own ramdisk")
	}
}
