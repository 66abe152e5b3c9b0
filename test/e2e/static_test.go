//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// staticIP is the agent's address in TestStaticNetworkVirtualMedia: QEMU's
// DHCP server hands out 10.0.2.15 upwards, so .77 can only come from the
// network data.
const staticIP = "10.0.2.77"

// TestStaticNetworkVirtualMedia is a host without DHCP as Metal3 enrols one:
// driver_info.preprovisioning_network_data (NMState, naming the NIC by its
// predictable name and MAC), boot over redfish-virtual-media with the ISO the
// controller builds. The agent must configure the static address before it
// can reach the controller at all; then the machine is inspected, deployed
// and boots its image.
func TestStaticNetworkVirtualMedia(t *testing.T) {
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Skip("xorriso not found: the controller builds virtual-media ISOs with it (apt-get install xorriso)")
	}
	l := newLab(t, "static", labOpts{uefi: true, guestIP: staticIP})
	defer l.summary()
	// The kernel calls the NIC eth0 (a ramdisk has no udev); the document
	// calls it enp0s3, as the installed system would, and gives its MAC.
	doc := fmt.Sprintf(`interfaces:
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
`, l.mac, staticIP)
	l.enrollWith("redfish-virtual-media", false, map[string]any{"preprovisioning_network_data": doc})
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)

	p := l.begin()
	ons := l.vm.PowerOns()
	l.provision("inspect", nil)
	l.waitState("manageable", 4*time.Minute, p)
	l.phaseTimings("inspect", p, time.Now())
	console := l.serialSince(ons)
	if !strings.Contains(console, "boot order cd") {
		t.Errorf("the agent did not boot from the virtual CD (power-on lines: %q)", powerOnLines(console))
	}
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

	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	_, ons = l.deployImage("good.qcow2", "qcow2", sha256Of(t, "good.qcow2"), "active")
	l.checkBooted(ons, "good", time.Now())
	if m, _ := l.vm.Media(context.Background()); m.Inserted {
		t.Errorf("the agent ISO is still inserted after the deploy: %+v", m)
	}
}
