//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
)

// setImage points instance_info at an image on the image server.
func (l *lab) setImage(file, format, checksum string) {
	l.api("PATCH", "/v1/nodes/"+l.node, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": l.images.URL + "/" + file},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": format},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": checksum},
	}, nil)
}

// deployImage deploys file and waits for want (active or deploy failed);
// it logs the phase timings and the image transfer rate.
func (l *lab) deployImage(file, format, checksum, want string) (node, int) {
	l.setImage(file, format, checksum)
	ons := l.vm.PowerOns()
	p := l.begin()
	l.provision("active", map[string]any{"configdrive": map[string]any{
		"meta_data": map[string]any{"uuid": l.node, "hostname": "e2e-" + l.name, "name": "e2e-" + l.name},
		"user_data": "#!/bin/sh\necho hello from kiln e2e\n",
	}})
	n := l.waitState(want, 6*time.Minute, p)
	l.phaseTimings("deploy", p, time.Now())
	if g, ok := l.images.last("/" + file); ok && g.dur > 0 {
		l.timing("image HTTP GET "+file, g.dur)
		l.t.Logf("TIMING %s: image streamed at %.1f MiB/s (%d bytes of %s over HTTP, the guest writing as it reads)",
			l.name, float64(g.bytes)/g.dur.Seconds()/(1<<20), g.bytes, file)
		l.timings = append(l.timings, "HTTP "+formatRate(g.bytes, g.dur))
	}
	if size, written, took, ok := l.agentWrite(ons); ok {
		l.t.Logf("TIMING %s: in the VM the agent wrote %s (%d bytes virtual, %d written, rest zero runs) in %.1fs: %.1f MiB/s of disk, %.1f MiB/s of data",
			l.name, file, size, written, took.Seconds(), float64(size)/took.Seconds()/(1<<20), float64(written)/took.Seconds()/(1<<20))
		l.timings = append(l.timings, fmt.Sprintf("agent write_image %.1fs (%.1f MiB/s disk, %.1f MiB/s data)",
			took.Seconds(), float64(size)/took.Seconds()/(1<<20), float64(written)/took.Seconds()/(1<<20)))
	}
	return n, ons
}

// agentWrite parses the agent's "image written" log line (size=, written=,
// took=) from the console output after power-on `after`.
func (l *lab) agentWrite(after int) (size, written int64, took time.Duration, ok bool) {
	for _, line := range strings.Split(l.serialSince(after), "\n") {
		if !strings.Contains(line, `msg="image written"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "size":
				fmt.Sscan(v, &size)
			case "written":
				fmt.Sscan(v, &written)
			case "took":
				took, _ = time.ParseDuration(v)
			}
		}
		ok = size > 0 && took > 0
	}
	return size, written, took, ok
}

func formatRate(b int64, d time.Duration) string {
	return fmt.Sprintf("%.1f MiB/s", float64(b)/d.Seconds()/(1<<20))
}

// checkBooted waits for the deployed OS's marker after power-on `after` and
// checks it names the image and the config drive.
func (l *lab) checkBooted(after int, image string, t0 time.Time) {
	line := l.waitMarker(after, 3*time.Minute)
	l.t.Logf("deployed OS: %s", line)
	l.timing("active → deployed OS marker", time.Since(t0))
	if !strings.Contains(line, "image="+image) {
		l.t.Errorf("the disk booted %q, want image=%s", line, image)
	}
	if !strings.Contains(line, "config-2="+l.node) || !strings.Contains(line, "hostname=e2e-"+l.name) {
		for _, s := range strings.Split(l.serialSince(after), "\n") {
			if strings.Contains(s, "deployedos:") || strings.Contains(s, "configdrive") || strings.Contains(s, "config drive") {
				l.t.Logf("console: %s", strings.TrimSpace(s))
			}
		}
		l.t.Errorf("the deployed OS did not read the config drive (uuid %s, hostname e2e-%s): %q", l.node, l.name, line)
	}
}

// TestBIOS is the whole life of a machine under SeaBIOS + iPXE: enroll with
// redfish, manage, inspect, provide (automated cleaning), deploy a qcow2
// image with a config drive, boot it from disk, undeploy.
func TestBIOS(t *testing.T) {
	t.Parallel()
	l := newLab(t, "bios", labOpts{})
	defer l.summary()
	l.enroll("ipxe", true)

	start := time.Now()
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	l.timing("manage", time.Since(start))

	p := l.begin()
	l.provision("inspect", nil)
	n := l.waitState("manageable", 4*time.Minute, p)
	l.phaseTimings("inspect", p, time.Now())
	var inv struct {
		Inventory struct {
			Interfaces []struct {
				MAC string `json:"mac_address"`
			} `json:"interfaces"`
			Disks []struct {
				Name string `json:"name"`
				Size int64  `json:"size"`
			} `json:"disks"`
			Memory struct {
				PhysicalMB int `json:"physical_mb"`
			} `json:"memory"`
		} `json:"inventory"`
	}
	l.api("GET", "/v1/nodes/"+l.node+"/inventory", nil, &inv)
	t.Logf("inventory: %d interfaces, disks %+v, memory %d MiB; properties %v", len(inv.Inventory.Interfaces), inv.Inventory.Disks, inv.Inventory.Memory.PhysicalMB, n.Properties)
	found := false
	for _, i := range inv.Inventory.Interfaces {
		found = found || strings.EqualFold(i.MAC, l.mac)
	}
	if !found {
		t.Errorf("inventory interfaces lack the PXE MAC %s", l.mac)
	}
	if len(inv.Inventory.Disks) == 0 || inv.Inventory.Disks[0].Size < 4<<30 {
		t.Errorf("inventory disks %+v: want the 4 GiB virtio disk", inv.Inventory.Disks)
	}
	var ports struct {
		Ports []struct {
			Address    string `json:"address"`
			PXEEnabled bool   `json:"pxe_enabled"`
		} `json:"ports"`
	}
	l.api("GET", "/v1/ports?detail=true&node_uuid="+l.node, nil, &ports)
	if len(ports.Ports) != 1 || !strings.EqualFold(ports.Ports[0].Address, l.mac) || !ports.Ports[0].PXEEnabled {
		t.Errorf("ports after inspection: %+v, want one PXE port %s", ports.Ports, l.mac)
	}

	p = l.begin()
	l.provision("provide", nil)
	l.waitState("available", 5*time.Minute, p)
	l.phaseTimings("provide (automated clean)", p, time.Now())

	n, ons := l.deployImage("good.qcow2", "qcow2", sha256Of(t, "good.qcow2"), "active")
	l.checkBooted(ons, "good", time.Now())
	_ = n

	p = l.begin()
	l.provision("deleted", nil)
	l.waitState("available", 5*time.Minute, p)
	l.phaseTimings("undeploy (clean)", p, time.Now())
}

// TestUEFI deploys a zstd-compressed raw image under OVMF.
func TestUEFI(t *testing.T) {
	t.Parallel()
	l := newLab(t, "uefi", labOpts{uefi: true})
	defer l.summary()
	// Network boot through iPXE's EFI driver; the virtual-media scenarios
	// boot the agent from a CD instead.
	l.enroll("ipxe", false)
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	_, ons := l.deployImage("good.raw.zst", "raw", sha256Of(t, "good.raw.zst"), "active")
	l.checkBooted(ons, "good", time.Now())
}

// TestUEFIVirtualMedia deploys under OVMF with the redfish-virtual-media
// boot interface: the BMC attaches the agent ISO as a CD (no network boot),
// then the disk boots. The ISO is the operator's (driver_info deploy_iso,
// the agent's kernel arguments baked in); TestStaticNetworkVirtualMedia
// boots the one the controller builds.
func TestUEFIVirtualMedia(t *testing.T) {
	t.Parallel()
	l := newLab(t, "vmedia", labOpts{uefi: true})
	defer l.summary()
	iso := "agent-" + l.name + ".iso"
	ctx, cancel := testtool.WithTimeout(t.Context(), "build", testtool.BuildTimeout)
	defer cancel()
	cmd := testtool.Command(ctx, filepath.Join(repoRoot, "test/e2e/mkagentiso.sh"),
		filepath.Join(repoRoot, "out/kiln-agent.kernel"), filepath.Join(repoRoot, "out/kiln-agent.initramfs"),
		filepath.Join(imageDir, iso),
		"console=ttyS0,115200n8 "+guestKernelArgs+" ipa-api-url=http://10.0.2.2:"+portOf(l.addr)+" ipa-advertise-host=127.0.0.1 ipa-advertise-port="+l.agentFw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the agent ISO: %v: %s", testtool.Why(ctx, err), out)
	}
	l.enrollWith("redfish-virtual-media", false, map[string]any{"deploy_iso": l.images.HostURL + "/" + iso})
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	_, ons := l.deployImage("good.qcow2", "qcow2", sha256Of(t, "good.qcow2"), "active")
	if s := l.serialSince(ons); !strings.Contains(s, "boot order cd") {
		t.Errorf("the agent did not boot from the virtual CD (power-on lines: %q)", powerOnLines(s))
	}
	l.checkBooted(ons, "good", time.Now())
	if m, _ := l.vm.Media(context.Background()); m.Inserted {
		t.Errorf("the agent ISO is still inserted after the deploy: %+v", m)
	}
}

func powerOnLines(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "boot order") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestChecksumMismatch deploys an image whose checksum does not match: the
// deploy fails naming both checksums and the disk cannot boot what was
// written.
func TestChecksumMismatch(t *testing.T) {
	t.Parallel()
	l := newLab(t, "badsum", labOpts{disk: "raw"})
	defer l.summary()
	l.enroll("ipxe", false)
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	want := sha256Of(t, "good.qcow2") // not broken.qcow2's
	got := sha256Of(t, "broken.qcow2")
	n, ons := l.deployImage("broken.qcow2", "qcow2", want, "deploy failed")
	le := deref(n.LastError)
	t.Logf("last_error: %s", le)
	if !strings.Contains(le, want) || !strings.Contains(le, got) {
		t.Errorf("last_error %q does not name both checksums (expected %s, actual %s)", le, want, got)
	}
	if s := l.serialSince(ons); strings.Contains(s, Marker) {
		t.Errorf("the broken image booted: %s", s[strings.Index(s, Marker):])
	}
	// The agent zeroes the first MiB after a failed write: nothing boots.
	disk, err := os.ReadFile(l.dir + "/disk.raw")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk[:1<<20], make([]byte, 1<<20)) {
		t.Errorf("the disk's first MiB is not zeroed after the failed deploy (MBR bytes %x)", disk[510:512])
	}
}

// TestControllerCrashDuringWrite kills the controller (SIGKILL) while the
// agent writes the image and starts it again on the same database: the
// deploy must end (active, or deploy failed with a reason), never hang.
func TestControllerCrashDuringWrite(t *testing.T) {
	t.Parallel()
	l := newLab(t, "crash", labOpts{})
	defer l.summary()
	l.enroll("ipxe", false)
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	l.images.rate.Store(1 << 20) // 1 MiB/s: write_image lasts ~20 s
	l.setImage("good.qcow2", "qcow2", sha256Of(t, "good.qcow2"))
	ons := l.vm.PowerOns()
	start := time.Now()
	l.provision("active", map[string]any{"configdrive": map[string]any{
		"meta_data": map[string]any{"uuid": l.node, "hostname": "e2e-" + l.name},
	}})
	deadline := time.Now().Add(4 * time.Minute)
	for l.images.sent.Load() < 4<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never streamed the image (state %s)", l.get().ProvisionState)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := l.get()
	t.Logf("killing kiln (pid %d) during %v, %d bytes of the image sent", l.kiln.Pid(), n.DeployStep["step"], l.images.sent.Load())
	l.kiln.Kill()
	time.Sleep(3 * time.Second)
	restart := time.Now()
	l.startKiln()
	// Either outcome is acceptable; hanging is not.
	end := time.Now().Add(5 * time.Minute)
	for {
		n = l.get()
		if n.ProvisionState == "active" || n.ProvisionState == "deploy failed" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("deploy hangs in %s after the controller restart (last_error %s)", n.ProvisionState, deref(n.LastError))
		}
		time.Sleep(250 * time.Millisecond)
	}
	l.timing("restart → "+n.ProvisionState, time.Since(restart))
	l.timing("deploy request → "+n.ProvisionState, time.Since(start))
	t.Logf("after the crash: %s, last_error %s", n.ProvisionState, deref(n.LastError))
	if n.ProvisionState == "active" {
		l.checkBooted(ons, "good", time.Now())
	} else if deref(n.LastError) == "" {
		t.Errorf("deploy failed without a last_error")
	}
}
