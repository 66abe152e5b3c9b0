package fleet

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// machine is one simulated server: its BMC's memory backend, wrapped so that
// a power-on into a network boot starts the ramdisk agent.
type machine struct {
	*bmcsim.Memory
	f        *Fleet
	bmc      *bmcsim.Service
	index    int
	addr     string
	mac      string
	interval time.Duration

	mu    sync.Mutex
	gen   int // power-on generation: a boot in flight starts its agent only if still current
	agent *fakeagent.Agent
	// lastBeat is when the agent last sent a heartbeat; pending says no
	// command has arrived since.
	lastBeat time.Time
	pending  bool
}

func (m *machine) agentURL() string {
	return "http://" + net.JoinHostPort(m.addr, strconv.Itoa(m.f.agtPort))
}

// Reset implements bmcsim.Backend: the memory backend powers and records the
// boot; a new power-on ends the running agent and, when it boots from the
// network, loads a new one as the iPXE script says.
func (m *machine) Reset(ctx context.Context, t bmcsim.ResetType) error {
	before := len(m.Memory.Boots())
	if err := m.Memory.Reset(ctx, t); err != nil {
		return err
	}
	boots := m.Memory.Boots()
	ps, _ := m.Memory.PowerState(ctx)
	if len(boots) == before && ps == bmcsim.PowerOn {
		return nil // no new power-on: whatever runs goes on
	}
	m.mu.Lock()
	m.gen++
	gen := m.gen
	old := m.agent
	m.agent = nil
	m.mu.Unlock()
	if old != nil {
		go old.Stop()
	}
	if ps != bmcsim.PowerOn || len(boots) == before {
		return nil
	}
	m.f.boots.Add(1)
	last := boots[len(boots)-1]
	if last.Target != bmcsim.TargetPxe {
		// The disk (the instance), or anything the fleet does not model
		// as an agent boot.
		m.f.noAgent.Add(1)
		return nil
	}
	// Firmware and iPXE take their time after the BMC answered; the BMC
	// does not wait for them.
	m.f.wg.Add(1)
	go func() {
		defer m.f.wg.Done()
		m.netboot(gen)
	}()
	return nil
}

// netboot fetches the machine's iPXE script, as iPXE would, and starts the
// agent it loads, with the kernel arguments it gives.
func (m *machine) netboot(gen int) {
	if d := m.f.cfg.BootDelay; d > 0 {
		select {
		case <-m.f.closing:
			return
		case <-time.After(time.Duration(float64(d) * (1 + rand.Float64()/2))):
		}
	}
	var script string
	var err error
	for try := 0; try < 10; try++ {
		if script, err = m.fetchScript(); err == nil {
			break
		}
		if m.f.closed() || !m.current(gen) {
			return
		}
		time.Sleep(time.Second) // the script's own retry loop waits 10 s; a shorter one keeps benchmarks honest about the controller
	}
	if err != nil {
		m.f.bootErrs.Add(1)
		m.f.log.Warn("fleet: network boot failed", "machine", m.index, "err", err)
		return
	}
	k, agent := parseScript(script)
	if !agent {
		m.f.noAgent.Add(1)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen || m.f.closed() {
		return
	}
	if k.apiURL == "" {
		m.f.bootErrs.Add(1)
		m.f.log.Warn("fleet: iPXE script without ipa-api-url", "machine", m.index)
		return
	}
	a, err := m.f.newAgent(m, k)
	if err != nil {
		m.f.bootErrs.Add(1)
		m.f.log.Warn("fleet: start agent", "machine", m.index, "err", err)
		return
	}
	m.agent = a
	m.pending = false
	m.f.agents.Add(1)
}

func (m *machine) current(gen int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen == gen
}

func (m *machine) fetchScript() (string, error) {
	u := m.f.cfg.BootURL + "?" + url.Values{"mac": {m.mac}}.Encode()
	c := &http.Client{Timeout: 30 * time.Second, Transport: m.f.client}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %s", u, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// kernelArgs are the agent's arguments the fleet acts on.
type kernelArgs struct {
	apiURL     string // ipa-api-url
	token      string // ipa-agent-token (pre-generated), if any
	inspectURL string // ipa-inspection-callback-url: inspect before lookup
}

// parseScript reads an iPXE script kiln serves: agent is false for a
// local-disk script; otherwise the kernel line's arguments.
func parseScript(script string) (k kernelArgs, agent bool) {
	for line := range strings.SplitSeq(script, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "kernel" {
			continue
		}
		agent = true
		for _, a := range f[1:] {
			name, val, ok := strings.Cut(a, "=")
			if !ok {
				continue
			}
			switch name {
			case "ipa-api-url":
				k.apiURL = val
			case "ipa-agent-token":
				k.token = val
			case "ipa-inspection-callback-url":
				k.inspectURL = val
			}
		}
	}
	return k, agent
}

func (m *machine) running() *fakeagent.Agent {
	m.mu.Lock()
	a := m.agent
	m.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.Stopped():
		return nil
	default:
		return a
	}
}

func (m *machine) stopAgent() {
	m.mu.Lock()
	a := m.agent
	m.agent = nil
	m.gen++
	m.mu.Unlock()
	if a != nil {
		a.Stop()
	}
}

func (m *machine) heartbeatSent(at time.Time) {
	m.mu.Lock()
	m.lastBeat, m.pending = at, true
	m.mu.Unlock()
}

// commandArrived records the delay from the last heartbeat to a command
// the controller sent, once per heartbeat.
func (m *machine) commandArrived(at time.Time, command string) {
	m.mu.Lock()
	beat, pending := m.lastBeat, m.pending
	m.pending = false
	m.mu.Unlock()
	if pending {
		m.f.lat.Add(at.Sub(beat), command)
	}
}

// inventory is what the agent reports: the BMC's view of the same machine,
// in ironic-python-agent's shape.
func inventory(inv bmcsim.Inventory, mac string) map[string]any {
	disks := make([]any, 0, len(inv.Disks))
	for i, d := range inv.Disks {
		disks = append(disks, map[string]any{"name": "/dev/vd" + string(rune('a'+i)), "size": d.SizeBytes, "rotational": false,
			"model": "SIM DISK", "serial": fmt.Sprintf("%s-%d", inv.SerialNumber, i)})
	}
	ifaces := make([]any, 0, len(inv.NICs))
	for i, n := range inv.NICs {
		ifaces = append(ifaces, map[string]any{"name": fmt.Sprintf("eth%d", i), "mac_address": n.MAC, "has_carrier": true})
	}
	return map[string]any{
		"cpu":           map[string]any{"count": inv.CPUCount, "architecture": "x86_64", "model_name": inv.CPUModel, "frequency": "2400", "flags": []string{}},
		"memory":        map[string]any{"total": int64(inv.MemoryGiB) << 30, "physical_mb": inv.MemoryGiB << 10},
		"disks":         disks,
		"interfaces":    ifaces,
		"boot":          map[string]any{"current_boot_mode": "uefi", "pxe_interface": mac},
		"system_vendor": map[string]any{"manufacturer": inv.Manufacturer, "product_name": inv.Model, "serial_number": inv.SerialNumber},
		"bmc_address":   "0.0.0.0",
		"bmc_v6address": "::/0",
		"hostname":      "localhost",
	}
}

// stepBehavior makes write_image check its image_info and answer as
// ironic-python-agent does; every other step succeeds at once.
func stepBehavior(kind, step string, args map[string]any) (any, error, time.Duration) {
	if step != "write_image" {
		return nil, nil, 0
	}
	info, _ := args["image_info"].(map[string]any)
	id, _ := info["id"].(string)
	urls, _ := info["urls"].([]any)
	if id == "" || len(urls) == 0 {
		return nil, fmt.Errorf("image_info needs id and urls, got %v", args["image_info"]), 0
	}
	return fmt.Sprintf("image (%s) written to device /dev/vda", id), nil, 0
}
