package agent

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// Version is reported as agent_version and by GET /v1/status.
var Version = "kiln-agent-0.1"

// Deps plugs the hardware parts into the runtime. Every field is optional: a
// command whose part is missing FAILS with "not available in this agent build"
// instead of pretending to succeed.
type Deps struct {
	// NetworkUp brings the network up (links, DHCP); retried until it succeeds.
	NetworkUp func(ctx context.Context) error
	// Inventory returns the hardware inventory (proto.Inventory) for
	// poll.get_hardware_info and inspection.
	Inventory func(ctx context.Context) (any, error)
	// WriteImage writes an image (standby.prepare_image, deploy step write_image).
	WriteImage func(ctx context.Context, req steps.ImageRequest) (steps.ImageResult, error)
	// InstallBootloader is image.install_bootloader.
	InstallBootloader func(ctx context.Context, p proto.InstallBootloaderParams, safety steps.Safety) error
	// PartitionUUIDs answers standby.get_partition_uuids; when nil the UUIDs
	// recorded by the last WriteImage are returned.
	PartitionUUIDs func(ctx context.Context) (proto.PartitionUUIDs, error)
	// FinalizeRescue is rescue.finalize_rescue.
	FinalizeRescue func(ctx context.Context, p proto.FinalizeRescueParams) error
	// Power reboots or powers off the machine; default: sync + reboot(2) in a
	// ramdisk, refused outside one.
	Power func(ctx context.Context, action PowerAction) error
	// Managers are extra hardware managers (besides steps.Registered(), the
	// plugins and the built-in generic manager).
	Managers []*steps.Manager
	// Steps are the generic manager's steps besides write_image
	// (erase_devices, inject_files, raid.create_configuration, …).
	Steps []steps.Def
	// MACs lists the MAC addresses to look up with; default: every interface's.
	MACs func() []string
	// PCIDevicesDir is where the pci-devices collector reads (default
	// /sys/bus/pci/devices); DMIDecode runs "dmidecode -t bios -t processor
	// -t memory" for the dmi-decode collector; ListenLLDP waits for one LLDP
	// frame on each named interface for the lldp collector. Tests replace them.
	PCIDevicesDir string
	DMIDecode     func(ctx context.Context) (string, error)
	ListenLLDP    func(ctx context.Context, ifaces []string) (map[string][]proto.LLDPTLV, error)
	// LogFiles are extra files for log.collect_system_logs (default: a few
	// /proc files); the agent log ring and the kernel log are always included.
	LogFiles []string

	// Safety says which devices destructive steps may touch.
	Safety steps.Safety
	// Clock (default RealClock), Log (default slog.Default()), Ring (default 4 MiB).
	Clock Clock
	Log   *slog.Logger
	Ring  *Ring
	// HTTPClient talks to the controller; default honours Config.Insecure.
	HTTPClient *http.Client
	// Rand seeds the jitter (tests pin it).
	Rand *rand.Rand
}

// PowerAction is what Deps.Power is asked to do.
type PowerAction string

// Power actions.
const (
	PowerOff PowerAction = "poweroff"
	Reboot   PowerAction = "reboot"
)

// GenericManagerName and GenericManagerVersion identify the built-in manager.
const (
	GenericManagerName    = "generic_hardware_manager"
	GenericManagerVersion = "1.0"
)

// Agent is one run of kiln-agent.
type Agent struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	ring    *Ring
	clock   Clock
	client  *client
	safety  steps.Safety
	set     *steps.Set
	started time.Time
	exts    map[string]map[string]cmdSpec

	rndMu sync.Mutex
	rnd   *rand.Rand

	mu          sync.Mutex
	token       string
	node        *proto.LookupNode
	hbTimeout   time.Duration
	maxVer      Microversion
	callbackURL string
	verifyCA    string
	lockedDown  bool
	// tokenReads: a command status read carried the valid token, so reads
	// without one are refused from now on (checkReadToken).
	tokenReads bool
	partUUIDs  *proto.PartitionUUIDs
	lookupCfg  proto.LookupConfig
	baseCtx    context.Context
	server     *http.Server

	cmdMu sync.Mutex
	cmds  []*Command
	byID  map[string]*Command

	hbNow    chan struct{}
	lockdown chan struct{}
}

// New builds an agent: evaluates hardware managers (built-in, registered,
// Deps.Managers and the executable plugins in cfg.PluginDir).
func New(ctx context.Context, cfg Config, deps Deps) (*Agent, error) {
	if deps.Clock == nil {
		deps.Clock = RealClock
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Ring == nil {
		deps.Ring = NewRing(4 << 20)
	}
	if deps.Rand == nil {
		deps.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	hc := deps.HTTPClient
	if hc == nil {
		var err error
		if hc, err = controllerHTTPClient(cfg); err != nil {
			return nil, err
		}
	}
	a := &Agent{
		cfg: cfg, deps: deps, log: deps.Log, ring: deps.Ring, clock: deps.Clock, rnd: deps.Rand,
		client:    &client{base: strings.TrimRight(cfg.APIURL, "/"), http: hc, userAgent: Version},
		safety:    deps.Safety,
		started:   deps.Clock.Now(),
		token:     cfg.AgentToken,
		hbTimeout: 300 * time.Second,
		byID:      map[string]*Command{},
		hbNow:     make(chan struct{}, 1),
		lockdown:  make(chan struct{}),
		baseCtx:   ctx,
	}
	var defs []steps.Def
	if deps.WriteImage != nil {
		defs = append(defs, steps.Def{Kind: proto.StepDeploy, Step: proto.Step{Step: "write_image", Priority: 0, Interface: "deploy",
			ArgsInfo: map[string]proto.ArgInfo{
				"image_info":  {Description: "image to write (image_info)", Required: true},
				"configdrive": {Description: "config drive (string or dict)", Required: false},
			}}, Run: a.writeImageStep})
	}
	generic, err := steps.NewManager(GenericManagerName, GenericManagerVersion, steps.SupportGeneric, append(defs, deps.Steps...)...)
	if err != nil {
		return nil, err
	}
	ms := []*steps.Manager{generic}
	ms = append(ms, steps.Registered()...)
	ms = append(ms, deps.Managers...)
	if cfg.PluginDir != "" {
		ps, err := steps.LoadPlugins(ctx, cfg.PluginDir, a.log)
		if err != nil {
			a.log.Error("some step plugins were skipped", "err", err)
		}
		ms = append(ms, steps.PluginManagers(ps)...)
	}
	a.set = steps.NewSet(ctx, a.log, ms...)
	a.exts = a.builtinCommands()
	return a, nil
}

// Steps returns the evaluated hardware managers.
func (a *Agent) Steps() *steps.Set { return a.set }

func (a *Agent) jitter(f func(r *rand.Rand) time.Duration) time.Duration {
	a.rndMu.Lock()
	defer a.rndMu.Unlock()
	return f(a.rnd)
}

// Token returns the current agent token.
func (a *Agent) Token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// NodeUUID returns the looked-up node's UUID ("" before the lookup).
func (a *Agent) NodeUUID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.node == nil {
		return ""
	}
	return a.node.UUID
}

// CallbackURL returns the URL advertised in heartbeats.
func (a *Agent) CallbackURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.callbackURL
}

// validToken checks a token sent by the controller in constant time.
func (a *Agent) validToken(t string) bool {
	mine := a.Token()
	return mine != "" && subtle.ConstantTimeCompare([]byte(mine), []byte(t)) == 1
}

// Run is the agent's life: network, inspection (if asked), lookup, command
// API, heartbeats. It returns only when ctx ends or on a fatal error (the
// supervisor restarts it; see Supervise).
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	a.baseCtx = ctx
	a.mu.Unlock()
	if err := a.networkUp(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(a.cfg.ListenHost, strconv.Itoa(a.cfg.ListenPort)))
	if err != nil {
		return fmt.Errorf("listen for the command API on port %d: %w", a.cfg.ListenPort, err)
	}
	defer ln.Close()

	uuid := a.cfg.NodeUUID
	if a.inspectionURL() != "" {
		u, err := a.inspect(ctx)
		if err != nil {
			a.log.Error("inspection failed", "err", err)
		} else if u != "" {
			uuid = u
		}
	}
	if a.cfg.APIURL == "" {
		a.log.Info("no ipa-api-url: inspection only, staying idle")
		<-ctx.Done()
		return ctx.Err()
	}
	if err := a.Lookup(ctx, uuid); err != nil {
		return err
	}
	if err := a.prepareCallback(ctx, ln.Addr().(*net.TCPAddr).Port); err != nil {
		return err
	}
	srvErr := make(chan error, 1)
	go func() { srvErr <- a.serve(ln) }()
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		a.HeartbeatLoop(ctx)
	}()
	select {
	case <-ctx.Done():
		a.shutdownServer()
		<-hbDone
		return ctx.Err()
	case err := <-srvErr:
		a.mu.Lock()
		locked := a.lockedDown
		a.mu.Unlock()
		if locked {
			a.log.Warn("agent locked down: command API and heartbeats stopped")
			<-ctx.Done()
			<-hbDone
			return ctx.Err()
		}
		return fmt.Errorf("command API server: %w", err)
	}
}

func (a *Agent) networkUp(ctx context.Context) error {
	if a.deps.NetworkUp == nil {
		return nil
	}
	for n := 1; ; n++ {
		err := a.deps.NetworkUp(ctx)
		if err == nil {
			return nil
		}
		wait := a.jitter(func(r *rand.Rand) time.Duration { return LookupBackoff(r, n) })
		a.log.Error("bringing the network up failed; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.clock.After(wait):
		}
	}
}

// lookupMACs lists BOOTIF first, then the extra and interface MACs, deduplicated.
func (a *Agent) lookupMACs() []string {
	var all []string
	if a.cfg.BootIF != "" {
		all = append(all, a.cfg.BootIF)
	}
	all = append(all, a.cfg.ExtraMACs...)
	if a.deps.MACs != nil {
		all = append(all, a.deps.MACs()...)
	} else {
		all = append(all, interfaceMACs()...)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range all {
		hw, err := net.ParseMAC(m)
		if err != nil || len(hw) != 6 {
			continue
		}
		s := hw.String()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func interfaceMACs() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || len(i.HardwareAddr) != 6 {
			continue
		}
		out = append(out, i.HardwareAddr.String())
	}
	sort.Strings(out)
	return out
}

// Lookup finds this machine's node: GET / for the controller's microversion,
// then GET /v1/lookup, retried with randomized exponential backoff (1–60 s;
// 5/10/30 s pauses on 409) until cfg.LookupTimeout has passed.
func (a *Agent) Lookup(ctx context.Context, nodeUUID string) error {
	deadline := a.clock.Now().Add(a.cfg.LookupTimeout)
	macs := a.lookupMACs()
	if len(macs) == 0 && nodeUUID == "" {
		return fmt.Errorf("lookup: no MAC address and no node UUID to look up with")
	}
	haveVer := false
	var failures, conflicts int
	for {
		var err error
		var code int
		if !haveVer {
			var v Microversion
			v, err = a.client.maxVersion(ctx)
			var he *HTTPError
			switch {
			case err == nil:
				haveVer = true
				a.setMaxVer(v)
			case errors.As(err, &he):
				// The controller answers but GET / is not the Ironic root: assume
				// an old API, as IPA does.
				a.log.Warn("cannot read the controller's API version; assuming "+fallbackMicroversion.String(), "err", err)
				haveVer = true
				a.setMaxVer(fallbackMicroversion)
				err = nil
			}
		}
		if err == nil {
			var resp proto.LookupResponse
			ver := minVersion(a.maxVersion(), Microversion{1, 62})
			resp, code, err = a.client.lookup(ctx, ver, macs, nodeUUID)
			if err == nil {
				return a.applyLookup(resp)
			}
		}
		var wait time.Duration
		if code == http.StatusConflict {
			conflicts++
			wait = ConflictPause(conflicts)
		} else {
			failures++
			wait = a.jitter(func(r *rand.Rand) time.Duration { return LookupBackoff(r, failures) })
		}
		if a.clock.Now().Add(wait).After(deadline) {
			return fmt.Errorf("lookup with MACs %v (node %q) gave up after %s: %w", macs, nodeUUID, a.cfg.LookupTimeout, err)
		}
		a.log.Warn("lookup failed; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.clock.After(wait):
		}
	}
}

func (a *Agent) setMaxVer(v Microversion) {
	a.mu.Lock()
	a.maxVer = v
	a.mu.Unlock()
}

func (a *Agent) maxVersion() Microversion {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maxVer
}

// applyLookup records node, heartbeat timeout and token. "******" keeps the
// token we have; a token shorter than 32 characters is ignored (as IPA does).
func (a *Agent) applyLookup(resp proto.LookupResponse) error {
	if resp.Node.UUID == "" {
		return fmt.Errorf("lookup: response has no node uuid")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := resp.Node
	a.node = &n
	a.lookupCfg = resp.Config
	a.lookupCfg.AgentToken = ""
	if resp.Config.HeartbeatTimeout > 0 {
		a.hbTimeout = time.Duration(resp.Config.HeartbeatTimeout) * time.Second
	}
	switch t := resp.Config.AgentToken; {
	case t == "" || t == proto.MaskedToken:
		if a.token == "" && resp.Config.AgentTokenRequired {
			a.log.Error("controller requires an agent token but sent it masked and none was given on the kernel command line")
		}
	case len(t) < 32:
		a.log.Warn("ignoring an agent token shorter than 32 characters")
	default:
		a.token = t
	}
	a.log.Info("lookup succeeded", "node", n.UUID, "heartbeat_timeout", a.hbTimeout, "have_token", a.token != "")
	return nil
}

// prepareCallback works out callback_url (and the TLS certificate).
func (a *Agent) prepareCallback(ctx context.Context, port int) error {
	host := a.cfg.AdvertiseHost
	if host == "" {
		ip, err := localAddrFor(ctx, a.cfg.APIURL)
		if err != nil {
			return fmt.Errorf("find the address to advertise: %w", err)
		}
		host = ip.String()
	}
	if a.cfg.AdvertisePort != 0 {
		port = a.cfg.AdvertisePort
	}
	scheme := "http"
	if a.cfg.AutoTLS {
		if a.maxVersion().Less(Microversion{1, 68}) {
			a.log.Warn("controller too old for agent_verify_ca (needs 1.68); serving plain HTTP", "max_version", a.maxVersion())
		} else {
			cert, pemCert, err := selfSignedCert(host, a.clock.Now())
			if err != nil {
				return fmt.Errorf("generate the agent's TLS certificate: %w", err)
			}
			a.mu.Lock()
			a.verifyCA = pemCert
			a.server = newServer(a.handler(), cert)
			a.mu.Unlock()
			scheme = "https"
		}
	}
	a.mu.Lock()
	if a.server == nil {
		a.server = newServer(a.handler(), nil)
	}
	a.callbackURL = scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
	a.mu.Unlock()
	a.log.Info("command API address", "callback_url", a.CallbackURL())
	return nil
}

// localAddrFor returns the local IP the kernel uses to reach the controller
// (a UDP "connect" sends nothing; it only picks a route and source address).
func localAddrFor(ctx context.Context, apiURL string) (net.IP, error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", apiURL, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, fmt.Errorf("route to %s: %w", u.Host, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

// ForceHeartbeat asks for a heartbeat now (a command finished): at once when
// the controller is Kiln, else as IPA does, no sooner than
// ForcedHeartbeatGap after the previous heartbeat.
func (a *Agent) ForceHeartbeat() {
	select {
	case a.hbNow <- struct{}{}:
	default:
	}
}

// immediateHeartbeat says whether the controller asked, in its lookup
// answer, for heartbeats the instant a step finishes (Kiln does; Ironic not).
func (a *Agent) immediateHeartbeat() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookupCfg.ImmediateHeartbeat
}

// HeartbeatLoop heartbeats right away, then every heartbeat_timeout ×
// U(0.3, 0.6), 5–10 s after an error, and when ForceHeartbeat is called
// (see there for when). It returns when ctx ends or the agent is locked down.
func (a *Agent) HeartbeatLoop(ctx context.Context) {
	var (
		wait time.Duration
		last time.Time // when the previous heartbeat was sent
	)
	for {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-a.lockdown:
				return
			case <-a.hbNow:
				if a.immediateHeartbeat() {
					break
				}
				if gap := last.Add(ForcedHeartbeatGap).Sub(a.clock.Now()); gap > 0 {
					select {
					case <-ctx.Done():
						return
					case <-a.lockdown:
						return
					case <-a.clock.After(gap):
					}
				}
			case <-a.clock.After(wait):
			}
		}
		select {
		case <-a.lockdown:
			return
		default:
		}
		last = a.clock.Now()
		if err := a.Heartbeat(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = a.jitter(HeartbeatErrorInterval)
			a.log.Warn("heartbeat failed", "err", err, "retry_in", wait)
			continue
		}
		a.mu.Lock()
		hb := a.hbTimeout
		a.mu.Unlock()
		wait = a.jitter(func(r *rand.Rand) time.Duration { return HeartbeatInterval(r, hb) })
	}
}

// Heartbeat sends one heartbeat.
func (a *Agent) Heartbeat(ctx context.Context) error {
	a.mu.Lock()
	if a.node == nil {
		a.mu.Unlock()
		return fmt.Errorf("heartbeat before lookup")
	}
	uuid := a.node.UUID
	ver := minVersion(a.maxVer, Microversion{1, 68})
	req := proto.HeartbeatRequest{CallbackURL: a.callbackURL, AgentVersion: Version}
	if !ver.Less(Microversion{1, 62}) {
		req.AgentToken = a.token
	}
	if !ver.Less(Microversion{1, 68}) {
		req.AgentVerifyCA = a.verifyCA
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err := a.client.heartbeat(ctx, ver, uuid, req)
	return err
}
