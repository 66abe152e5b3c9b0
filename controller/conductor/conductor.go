// Package conductor makes the controller act: it owns a share of the nodes
// (consistent hashing over the live conductors of its group), takes each
// node's reservation before touching it, and carries out what the API
// recorded — provision verbs, power and boot-device requests — through the
// node's hardware type and, for in-band work, the ramdisk agent.
//
// Every decision is committed to the store before the next action, so a
// conductor killed at any moment leaves nodes that another conductor (or this
// one, restarted) can resume or fail cleanly.
package conductor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Config tunes a conductor. Zero values take the defaults in brackets.
type Config struct {
	Store store.Store
	Agent AgentClient
	// Name identifies this conductor (unique among those sharing a store).
	Name  string
	Group string
	// APIURL is the controller URL agents are told to use (ipa-api-url).
	APIURL string
	Log    *slog.Logger

	Workers           int           // nodes acted on at once [32]
	HeartbeatInterval time.Duration // conductor liveness heartbeat [5s]
	ScanInterval      time.Duration // how often owned nodes are checked for work [1s]
	// AgentWorkers act only on nodes whose agent heartbeated, besides
	// Workers (which take those first too) [8]: an agent's turn-around
	// does not wait for a worker busy with a BMC or a bulk operation.
	AgentWorkers int
	// BulkPasses bounds the work-lane passes that compute at once [8]
	// (places.go): the others wait for a place, leaving the cores to the
	// passes agents wait on. A pass gives its place up while a BMC or
	// agent call of its own is slow, so Workers still bounds the slow
	// BMCs waited on at once.
	BulkPasses int
	// CallbackTimeout bounds how long a node waits for its agent in
	// wait call-back, clean wait and inspect wait [30m].
	CallbackTimeout time.Duration
	// PowerSyncInterval is how often stable nodes' power state is read back
	// from their BMC [60s]; negative disables it.
	PowerSyncInterval time.Duration
	// PowerSyncWorkers bounds the BMCs read at once in a sync round [8].
	PowerSyncWorkers int
	// PowerSyncBudget is how long a round may start BMC calls [3/4 of
	// PowerSyncInterval]; nodes it does not reach go first next round.
	PowerSyncBudget time.Duration
	// PowerSyncBMCInterval is the least time between two sync calls to one
	// BMC [0: one call at a time per BMC, back to back].
	PowerSyncBMCInterval time.Duration
	// PowerSyncCallTimeout bounds one node's power read [30s].
	PowerSyncCallTimeout time.Duration
	// AgentHeartbeatTimeout is handed to agents (lookup's heartbeat_timeout);
	// an agent heartbeats every 0.3–0.6 of it [60s].
	AgentHeartbeatTimeout time.Duration
	// Peers carries wake-ups to the other controllers sharing the store
	// (store.WakerOf); nil: none, their scans find the nodes.
	Peers store.Waker
	// InspectionRules run on every node whose in-band inspection finishes
	// (see inspectionrules.go); nil: none.
	InspectionRules *inspectrules.Set
}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = 32
	}
	if c.AgentWorkers <= 0 {
		c.AgentWorkers = 8
	}
	if c.BulkPasses <= 0 {
		c.BulkPasses = 8
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = time.Second
	}
	if c.CallbackTimeout <= 0 {
		c.CallbackTimeout = 30 * time.Minute
	}
	if c.PowerSyncInterval == 0 {
		c.PowerSyncInterval = time.Minute
	}
	if c.PowerSyncWorkers <= 0 {
		c.PowerSyncWorkers = 8
	}
	if c.PowerSyncBudget <= 0 && c.PowerSyncInterval > 0 {
		c.PowerSyncBudget = c.PowerSyncInterval * 3 / 4
	}
	if c.PowerSyncCallTimeout <= 0 {
		c.PowerSyncCallTimeout = 30 * time.Second
	}
	if c.AgentHeartbeatTimeout <= 0 {
		c.AgentHeartbeatTimeout = time.Minute
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Conductor acts on the nodes it owns.
type Conductor struct {
	cfg Config
	st  store.Store
	log *slog.Logger

	mu     sync.Mutex
	ring   *Ring
	queued map[string]lane
	// busy holds the nodes a worker is acting on, each with the lane it
	// was asked for again meanwhile, if it was; see enqueue.
	busy map[string]askedAgain
	// awaited flags the work-lane passes whose agent heartbeated while
	// they held the node: their writes go ahead from then on (worker).
	awaited map[string]*atomic.Bool
	// passEnded is when a worker last finished with each node, kept
	// for one scan round (foundByScan).
	passEnded map[string]time.Time
	// queuedAt is when each queued node entered its lane (waits.go).
	queuedAt map[string]time.Time
	// queue holds the nodes to look at; agents holds those whose agent
	// heartbeated, which the workers take first (see queue.go).
	queue  chan string
	agents chan string
	// places holds the work-lane passes' places to compute, turn the
	// right to wait for the work lane's next node (places.go).
	places, turn chan struct{}
	placed       map[string]*place

	// beats signals agent heartbeats to passes waiting on a command.
	beats agentBeats

	// latency of heartbeat → next command, for reporting.
	lat   *latencies
	waits *waits

	live  liveness
	power *powerSync
	wakes wakes
	alloc *allocator

	// wake-ups for nodes other conductors own (peerwake.go).
	peerWakes                                          chan peerWake
	peerWakesSent, peerWakesReceived, peerWakesDropped atomic.Uint64

	hwState // node BIOS/firmware records (hwsteps.go)
}

// New builds a conductor; Run starts it.
func New(cfg Config) *Conductor {
	cfg.defaults()
	c := &Conductor{
		cfg:       cfg,
		st:        cfg.Store,
		log:       cfg.Log.With("conductor", cfg.Name),
		ring:      NewRing([]string{cfg.Name}),
		queued:    map[string]lane{},
		busy:      map[string]askedAgain{},
		awaited:   map[string]*atomic.Bool{},
		queuedAt:  map[string]time.Time{},
		passEnded: map[string]time.Time{},
		queue:     make(chan string, 65536),
		agents:    make(chan string, 65536),
		places:    make(chan struct{}, cfg.BulkPasses),
		turn:      make(chan struct{}, 1),
		placed:    map[string]*place{},
		lat:       &latencies{},
		waits:     newWaits(),
	}
	if cfg.Peers != nil {
		c.peerWakes = make(chan peerWake, 65536)
	}
	for range cfg.BulkPasses {
		c.places <- struct{}{}
	}
	c.turn <- struct{}{}
	c.waits.inUse = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kiln_conductor_bulk_places_in_use",
		Help: "Places held by bulk (work-lane) passes computing now, of --bulk-passes."},
		func() float64 { return float64(cap(c.places) - len(c.places)) })
	c.power = newPowerSync(c)
	c.alloc = newAllocator(c)
	return c
}

// Name is this conductor's name.
func (c *Conductor) Name() string { return c.cfg.Name }

// Run registers the conductor, recovers what a crash left behind, and acts on
// owned nodes until ctx ends; then it unregisters so others take over at once.
func (c *Conductor) Run(ctx context.Context) error {
	if err := c.st.RegisterConductor(ctx, store.Conductor{Hostname: c.cfg.Name, Group: c.cfg.Group}); err != nil {
		return fmt.Errorf("register conductor %s: %w", c.cfg.Name, err)
	}
	if err := c.refreshRing(ctx); err != nil {
		return err
	}
	c.recover(ctx)

	var wg sync.WaitGroup
	for i := range c.cfg.Workers + c.cfg.AgentWorkers {
		next := c.next
		if i >= c.cfg.Workers {
			next = c.nextAgent
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.worker(ctx, next)
		}()
	}
	// Liveness, peers, the scan and power sync each have a goroutine, so
	// that none can delay another: above all, no BMC call can hold up the
	// heartbeat that keeps this conductor's nodes its own.
	loops := []func(context.Context){c.heartbeatLoop, c.peersLoop, c.scanLoop, c.alloc.loop}
	if c.cfg.PowerSyncInterval > 0 {
		loops = append(loops, c.power.loop)
	}
	if c.cfg.Peers != nil {
		loops = append(loops, c.forwardLoop, c.listenLoop)
	}
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	c.stopWakes()
	unreg, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.st.UnregisterConductor(unreg, c.cfg.Name); err != nil {
		c.log.Warn("unregister conductor", "err", err)
	}
	return nil
}

func (c *Conductor) owns(uuid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ring.Owner(uuid) == c.cfg.Name
}

// ownsNode also checks the node's conductor group.
func (c *Conductor) ownsNode(n *proto.Node) bool {
	return n.ConductorGroup == c.cfg.Group && c.owns(n.UUID)
}

// refreshRing rebuilds the hash ring from the live conductors of our group.
func (c *Conductor) refreshRing(ctx context.Context) error {
	live, err := c.st.ListConductors(ctx, true)
	if err != nil {
		return fmt.Errorf("list conductors: %w", err)
	}
	var members []string
	for _, cd := range live {
		if cd.Group == c.cfg.Group {
			members = append(members, cd.Hostname)
		}
	}
	if len(members) == 0 {
		members = []string{c.cfg.Name}
	}
	r := NewRing(members)
	c.mu.Lock()
	changed := len(r.Members()) != len(c.ring.Members())
	c.ring = r
	c.mu.Unlock()
	if changed {
		c.log.Info("conductor ring changed", "members", r.Members())
	}
	return nil
}

// scanLoop looks for owned nodes with work every ScanInterval.
func (c *Conductor) scanLoop(ctx context.Context) { every(ctx, c.cfg.ScanInterval, c.scan) }

// scan queues every owned node that has work: a recorded request, a pending
// power or boot-device change, an agent heartbeat, or an expired wait. The
// store selects them by index (store.WorkQuery), so a round costs what the
// nodes with work cost, not what the fleet does.
func (c *Conductor) scan(ctx context.Context) {
	now := time.Now()
	uuids, err := c.st.NodesWithWork(ctx, store.WorkQuery{ConductorGroup: c.cfg.Group,
		HeartbeatBefore: now.Add(-c.cfg.AgentHeartbeatTimeout), WaitBefore: now.Add(-c.cfg.CallbackTimeout)})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("scan nodes", "err", err)
		}
		return
	}
	for _, u := range uuids {
		if c.owns(u) {
			c.foundByScan(u, now)
		}
	}
	c.forgetPassesBefore(now)
}

// errNotOwner is returned by process for nodes another conductor owns.
var errNotOwner = errors.New("node is owned by another conductor")
