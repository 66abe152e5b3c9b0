// Package fleet simulates a rack of bare-metal machines at the real
// protocols, in the manner of Metal3's fake-ipa: every machine has a Redfish
// BMC (test/bmcsim's memory backend) and, whenever the BMC powers it on into
// a network boot, a ramdisk agent (test/fakeagent) that fetches the iPXE
// script the controller serves for its MAC, then inspects, looks up,
// heartbeats and serves the agent's :9999 command API over real HTTP.
//
// Thousands of machines share two listeners: machine i has its own loopback
// address (127.20.x.y, see Addr) and both listeners route a connection by the
// local address it was made to, so the controller sees one BMC and one agent
// per machine, each at its own address, as in a real rack.
package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// MaxMachines is how many machines the address plan (127.20.a.b, b in
// 1..250) allows.
const MaxMachines = 250 * 256

// Credentials of every simulated BMC.
const (
	BMCUsername = "admin"
	BMCPassword = "password"
)

// Config describes a fleet.
type Config struct {
	// N machines, at most MaxMachines.
	N int
	// BootURL is where a network-booting machine asks for its iPXE script
	// (the controller's /boot/boot.ipxe, as DHCP would hand it out).
	BootURL string
	// HeartbeatInterval is the agents' periodic heartbeat; each agent picks
	// its own between 1 and 1.5 times it so the fleet does not beat in step
	// (default 20 s: ironic-python-agent beats at 0.3–0.6 of the 60 s
	// heartbeat_timeout kiln hands out). Agents also beat at once when a
	// command finishes, as the real one does.
	HeartbeatInterval time.Duration
	// BootDelay is how long a machine takes from power-on to asking for its
	// iPXE script (firmware, POST); each boot takes 1 to 1.5 times it.
	// Default none: real machines take minutes, but a controller must not
	// depend on that, and an agent that answers at once finds races (an
	// inventory posted before the inspect wait was recorded used to be lost).
	BootDelay time.Duration
	// Personality of the BMCs (default generic).
	Personality string
	// Logger for the fleet's own failures (default discard).
	Logger *slog.Logger
}

// Fleet is a running set of simulated machines.
type Fleet struct {
	cfg      Config
	log      *slog.Logger
	machines []*machine
	byAddr   map[string]*machine
	bmcSrv   *http.Server
	agentSrv *http.Server
	bmcPort  int
	agtPort  int
	client   *http.Transport // to the controller, shared by every agent
	lat      *Latencies
	systemID string

	boots, agents, noAgent atomic.Int64
	bootErrs               atomic.Int64
	closing                chan struct{}
	wg                     sync.WaitGroup
}

// Addr is machine i's loopback address: the BMC and the agent listen there.
func Addr(i int) string {
	return fmt.Sprintf("127.20.%d.%d", i/250, i%250+1)
}

// Start builds the machines (all powered off) and starts the listeners.
func Start(cfg Config) (*Fleet, error) {
	if cfg.N <= 0 || cfg.N > MaxMachines {
		return nil, fmt.Errorf("fleet: N=%d, want 1..%d", cfg.N, MaxMachines)
	}
	if cfg.BootURL == "" {
		return nil, errors.New("fleet: BootURL is required")
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 20 * time.Second
	}
	if cfg.Personality == "" {
		cfg.Personality = "generic"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := bmcsim.LookupPersonality(cfg.Personality)
	if err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, byAddr: make(map[string]*machine, cfg.N), lat: newLatencies(),
		closing: make(chan struct{}),
		client:  &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}
	for i := range cfg.N {
		m := &machine{f: f, index: i, addr: Addr(i), mac: bmcsim.MACForIndex(i),
			interval: time.Duration(float64(cfg.HeartbeatInterval) * (1 + rand.Float64()/2))}
		m.Memory = bmcsim.NewMemory(i, bmcsim.Inventory{Manufacturer: p.Manufacturer, Model: p.Model})
		svc, err := bmcsim.NewService(bmcsim.Config{Personality: p.Name, Username: BMCUsername, Password: BMCPassword,
			Systems: []bmcsim.SystemConfig{{Backend: m}}})
		if err != nil {
			return nil, fmt.Errorf("fleet: BMC %d: %w", i, err)
		}
		m.bmc = svc
		if f.systemID == "" {
			f.systemID = svc.SystemIDs()[0]
		}
		f.machines = append(f.machines, m)
		f.byAddr[m.addr] = m
	}
	if f.bmcSrv, f.bmcPort, err = f.listen(http.HandlerFunc(f.serveBMC)); err != nil {
		return nil, err
	}
	if f.agentSrv, f.agtPort, err = f.listen(http.HandlerFunc(f.serveAgent)); err != nil {
		_ = f.bmcSrv.Close()
		return nil, err
	}
	return f, nil
}

// listen serves h on a free port of every local address; connections from
// anywhere but loopback are closed unanswered.
func (f *Fleet) listen(h http.Handler) (*http.Server, int, error) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, 0, fmt.Errorf("fleet: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		// Idle connections go soon: thousands of machines, one process.
		IdleTimeout: 5 * time.Second,
		ErrorLog:    slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	go func() { _ = srv.Serve(loopbackOnly{ln}) }()
	return srv, ln.Addr().(*net.TCPAddr).Port, nil
}

// loopbackOnly refuses connections that do not come from this machine.
type loopbackOnly struct{ net.Listener }

func (l loopbackOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
			return c, nil
		}
		_ = c.Close()
	}
}

// machineOf finds the machine a request was addressed to.
func (f *Fleet) machineOf(r *http.Request) *machine {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if la == nil {
		return nil
	}
	host, _, _ := net.SplitHostPort(la.String())
	return f.byAddr[host]
}

func (f *Fleet) serveBMC(w http.ResponseWriter, r *http.Request) {
	m := f.machineOf(r)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	m.bmc.ServeHTTP(w, r)
}

// serveAgent hands a request to the agent running on the machine; with none
// (powered off, or booted from disk) the connection drops, as nothing
// listens on :9999 there.
func (f *Fleet) serveAgent(w http.ResponseWriter, r *http.Request) {
	m := f.machineOf(r)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	a := m.running()
	if a == nil {
		panic(http.ErrAbortHandler)
	}
	if r.Method == http.MethodPost && (r.URL.Path == "/v1/commands" || r.URL.Path == "/v1/commands/") {
		at := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, maxCommandBody))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		m.commandArrived(at, commandName(body))
	}
	a.ServeHTTP(w, r)
}

// maxCommandBody bounds what the fleet reads of a command: as much as
// the agent itself reads.
const maxCommandBody = 64 << 20

// commandName is the name an agent command request carries, or "?".
func commandName(body []byte) string {
	var c struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(body, &c) != nil || c.Name == "" {
		return "?"
	}
	return c.Name
}

// Machine is what an operator enrolls for machine i.
type Machine struct {
	// BMCURL is redfish_address; SystemID is redfish_system_id.
	BMCURL, SystemID string
	// MAC of the machine's one NIC (its port, and its PXE interface).
	MAC string
	// AgentURL is where its agent listens when it runs.
	AgentURL string
}

// Machine describes machine i.
func (f *Fleet) Machine(i int) Machine {
	m := f.machines[i]
	return Machine{
		BMCURL:   "http://" + net.JoinHostPort(m.addr, strconv.Itoa(f.bmcPort)),
		SystemID: "/redfish/v1/Systems/" + f.systemID,
		MAC:      m.mac,
		AgentURL: "http://" + net.JoinHostPort(m.addr, strconv.Itoa(f.agtPort)),
	}
}

// N is the number of machines.
func (f *Fleet) N() int { return len(f.machines) }

// Latencies are the heartbeat-to-next-command delays the agents measured.
func (f *Fleet) Latencies() *Latencies { return f.lat }

// Counters of the fleet's life so far.
type Counters struct {
	// PowerOns is every boot; Agents the boots that ran an agent;
	// LocalBoots those the iPXE script sent to the disk (or that booted
	// the disk directly).
	PowerOns, Agents, LocalBoots int64
	// BootErrors counts network boots that could not get their script.
	BootErrors int64
}

// Counters returns the fleet's counters.
func (f *Fleet) Counters() Counters {
	return Counters{PowerOns: f.boots.Load(), Agents: f.agents.Load(), LocalBoots: f.noAgent.Load(), BootErrors: f.bootErrs.Load()}
}

// Boots returns machine i's boot records (what the BMC was asked to boot).
func (f *Fleet) Boots(i int) []bmcsim.BootRecord { return f.machines[i].Boots() }

// PowerState is machine i's power state.
func (f *Fleet) PowerState(i int) bmcsim.PowerState {
	ps, _ := f.machines[i].PowerState(context.Background())
	return ps
}

// Close stops every agent and both listeners.
func (f *Fleet) Close() error {
	close(f.closing)
	for _, m := range f.machines {
		m.stopAgent()
	}
	f.wg.Wait()
	err := errors.Join(f.bmcSrv.Close(), f.agentSrv.Close())
	f.client.CloseIdleConnections()
	for _, m := range f.machines {
		m.stopAgent() // one a boot in flight may have started meanwhile
	}
	return err
}

func (f *Fleet) closed() bool {
	select {
	case <-f.closing:
		return true
	default:
		return false
	}
}

// heartbeatObserver notes each heartbeat a machine's agent sends.
type heartbeatObserver struct {
	m    *machine
	next http.RoundTripper
}

func (h heartbeatObserver) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(r.URL.Path) > len("/v1/heartbeat/") && r.URL.Path[:len("/v1/heartbeat/")] == "/v1/heartbeat/" {
		h.m.heartbeatSent(time.Now())
	}
	return h.next.RoundTrip(r)
}

// newAgent starts machine m's agent (called with m.mu held).
func (f *Fleet) newAgent(m *machine, k kernelArgs) (*fakeagent.Agent, error) {
	cfg := fakeagent.Config{
		ControllerURL:     k.apiURL,
		MACs:              []string{m.mac},
		Token:             k.token,
		HeartbeatInterval: m.interval,
		Inventory:         inventory(m.Inventory(), m.mac),
		Inspect:           k.inspectURL != "",
		OnPowerOff:        m.GuestPowerOff,
		StepBehavior:      stepBehavior,
		URL:               m.agentURL(),
		HTTPClient:        &http.Client{Timeout: 30 * time.Second, Transport: heartbeatObserver{m: m, next: f.client}},
		NoRecord:          true,
	}
	return fakeagent.Start(context.Background(), cfg)
}
