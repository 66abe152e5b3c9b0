package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/controller/conductor"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/metrics"
	"github.com/kilnhq/kiln/controller/netboot"
	"github.com/kilnhq/kiln/controller/ratelimit"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/controller/ui"
)

type serveOptions struct {
	listen    string
	pprof     string
	db        string
	conductor string
	group     string
	logLevel  string
	logJSON   bool

	apiURL                string
	mediaURL              string
	workers               int
	bulkPasses            int
	callbackTimeout       time.Duration
	agentHeartbeatTimeout time.Duration
	powerSyncInterval     time.Duration
	agentLimit            ratelimit.Config
	powerSyncWorkers      int
	heartbeatInterval     time.Duration
	scanInterval          time.Duration
	deadAfter             time.Duration

	bodyLimits map[string]int64

	bootDir     string
	bootDirSet  bool // --boot-dir given: its absence is worth a warning
	bootUnknown string
	bootConsole string

	netboot   netbootOptions
	flags     *pflag.FlagSet // to tell flags set from defaults
	trust     trustOptions
	discovery discoveryOptions
}

func newServeCmd() *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the controller: the /v1 API on an embedded SQLite store (or PostgreSQL)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			o.bootDirSet = cmd.Flags().Changed("boot-dir")
			o.flags = cmd.Flags()
			return serve(ctx, o)
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:6385", "address the API listens on")
	f.StringVar(&o.pprof, "pprof-listen", "", "loopback address serving net/http/pprof at /debug/pprof/ (off when empty; never on the API's listener)")
	f.StringVar(&o.db, "db", "./kiln.db", "database: a SQLite file path, sqlite://PATH, or postgres://… for several controllers")
	f.StringVar(&o.conductor, "conductor", host, "this controller's conductor name (unique among controllers sharing a database)")
	f.StringVar(&o.group, "conductor-group", "", "conductor group this controller serves")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.BoolVar(&o.logJSON, "log-json", false, "log as JSON lines instead of text")
	f.StringVar(&o.apiURL, "api-url", "", "controller URL that agents on the provisioned machines use (default: http://<listen address>)")
	f.StringVar(&o.mediaURL, "media-url", "", "controller URL that BMCs fetch virtual-media ISOs from, when they reach the controller by another address than the machines do (Ironic's external_http_url; default: --api-url)")
	f.IntVar(&o.workers, "workers", 32, "nodes the conductor acts on at once, counting those waiting on a slow BMC or agent")
	f.IntVar(&o.bulkPasses, "bulk-passes", 8, "passes of requested work (not an agent's) that compute at once; one waiting on a slow BMC or agent gives its place up")
	f.DurationVar(&o.callbackTimeout, "callback-timeout", 30*time.Minute, "how long a node may wait for its agent's first heartbeat (deploy, clean, inspect)")
	f.DurationVar(&o.agentHeartbeatTimeout, "agent-heartbeat-timeout", time.Minute, "heartbeat_timeout given to agents; a running agent silent this long fails its node")
	f.DurationVar(&o.heartbeatInterval, "conductor-heartbeat-interval", 5*time.Second, "how often this conductor reports that it is alive")
	f.DurationVar(&o.scanInterval, "conductor-scan-interval", time.Second, "how often the conductor looks for owned nodes with work it was not woken for (a lost wake-up, an expired wait)")
	f.DurationVar(&o.deadAfter, "conductor-dead-after", 30*time.Second, "a conductor silent this long is dead: its nodes and reservations move to the others")
	f.StringToInt64Var(&o.bodyLimits, "body-limit", nil, "largest request body in bytes per route class, e.g. provision=134217728 (classes: "+strings.Join(api.BodyLimitClasses(), ", ")+"; larger bodies get 413)")
	f.StringVar(&o.bootDir, "boot-dir", "./out", "directory served at /boot/files/: the agent kernel and initramfs (kiln-agent.kernel, kiln-agent.initramfs) and ISOs")
	f.StringVar(&o.bootUnknown, "boot-unknown", "local", "what a MAC no node has boots from /boot/boot.ipxe: local (its disk) or discovery (the agent)")
	f.StringVar(&o.bootConsole, "boot-console", "ttyS0,115200n8", "console= argument of the agent kernel")
	f.DurationVar(&o.powerSyncInterval, "power-sync-interval", time.Minute, "how often power states are read back from BMCs (0 disables)")
	f.Float64Var(&o.agentLimit.Rate, "agent-lookup-rate", api.DefaultAgentLimit.Rate, "requests per second each source address may make to /v1/lookup and /v1/continue_inspection (0 disables the limit; loopback is never limited)")
	f.IntVar(&o.agentLimit.Burst, "agent-lookup-burst", api.DefaultAgentLimit.Burst, "burst of /v1/lookup and /v1/continue_inspection requests allowed per source address")
	f.IntVar(&o.powerSyncWorkers, "power-sync-workers", 8, "BMCs read at once by a power-sync round; a round starts calls for 3/4 of the interval, and nodes not reached go first next round")
	addNetbootFlags(f, &o.netboot)
	addTrustFlags(f, &o.trust)
	addDiscoveryFlags(f, &o.discovery)
	return cmd
}

func newLogger(level string, asJSON bool) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: l}
	// Every line is scrubbed of agent tokens and URL credentials.
	if asJSON {
		return slog.New(secrets.NewLogHandler(slog.NewJSONHandler(os.Stderr, opts))), nil
	}
	return slog.New(secrets.NewLogHandler(slog.NewTextHandler(os.Stderr, opts))), nil
}

// serve runs the controller until ctx ends, then shuts down gracefully:
// in-flight requests finish, the conductor row is removed, the database closed.
func serve(ctx context.Context, o serveOptions) error {
	log, err := newLogger(o.logLevel, o.logJSON)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	if o.conductor == "" {
		return errors.New("--conductor must not be empty")
	}
	if err := api.CheckBodyLimits(o.bodyLimits); err != nil {
		return fmt.Errorf("--body-limit: %w", err)
	}
	if o.deadAfter <= 2*o.heartbeatInterval {
		return fmt.Errorf("--conductor-dead-after (%s) must be more than twice --conductor-heartbeat-interval (%s)", o.deadAfter, o.heartbeatInterval)
	}
	discovery, rules, err := o.discovery.load(o.bootUnknown, log)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, o.db, store.Options{DeadAfter: o.deadAfter})
	if err != nil {
		return fmt.Errorf("open database %s: %w", o.db, err)
	}
	defer st.Close()

	if o.pprof != "" {
		stopPprof, err := startPprof(o.pprof, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	tlsCfg, err := o.trust.tlsConfig(log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	if o.apiURL == "" {
		o.apiURL = "http://" + ln.Addr().String()
		if tlsCfg != nil {
			o.apiURL = "https://" + ln.Addr().String()
		}
	}
	o.apiURL = netbootAPIURL(o.flags, o.netboot, o.apiURL)
	if o.powerSyncInterval == 0 {
		o.powerSyncInterval = -1
	}
	// Every node write goes through the watched store: node changes reach
	// the event stream and the metrics whichever layer made them.
	bus := events.NewBus()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	met := metrics.New(reg, st)
	wst := events.Watch(st, events.PublishTo(bus), met.Observe)
	shutdownDrivers, err := loadDrivers(o, log)
	if err != nil {
		return err
	}
	cond := conductor.New(conductor.Config{
		Store: wst, Agent: agentclient.New(agentclient.Options{Logger: log}), Name: o.conductor, Group: o.group,
		APIURL: o.apiURL, Log: log, Workers: o.workers, BulkPasses: o.bulkPasses, CallbackTimeout: o.callbackTimeout,
		AgentHeartbeatTimeout: o.agentHeartbeatTimeout, PowerSyncInterval: o.powerSyncInterval, PowerSyncWorkers: o.powerSyncWorkers,
		HeartbeatInterval: o.heartbeatInterval, InspectionRules: rules,
		ScanInterval: o.scanInterval, Peers: store.WakerOf(st),
	})
	reg.MustRegister(cond.Collectors()...)
	condCtx, stopConductor := context.WithCancel(driver.WithBMCObserver(context.Background(), met))
	condDone := make(chan error, 1)
	go func() { condDone <- cond.Run(condCtx) }()
	defer func() {
		stopConductor()
		if err := <-condDone; err != nil {
			log.Error("conductor", "err", err)
		}
	}()
	apiServer := api.New(api.Config{Store: wst, Conductor: o.conductor, Logger: log, Notify: cond.Notify, NotifyAgent: cond.NotifyAgent, AgentHeartbeated: cond.AgentHeartbeated, NotifyAllocation: cond.NotifyAllocation,
		AgentHeartbeatTimeout: o.agentHeartbeatTimeout, Events: bus, AgentLimit: ratelimit.New(o.agentLimit),
		BodyLimits: o.bodyLimits, Discovery: discovery})
	apiServer.Echo().Use(met.Middleware())
	// The console's health page: node counts sampled every minute, six
	// hours kept.
	health := ui.NewHealthSampler(reg, 360)
	healthCtx, stopHealth := context.WithCancel(context.Background())
	defer stopHealth()
	go health.Run(healthCtx, time.Minute)
	apiServer.Echo().GET("/ui/*", echo.WrapHandler(ui.Handler(health)))
	apiServer.Echo().GET("/ui", echo.WrapHandler(http.HandlerFunc(ui.Redirect)))
	if err := mountBoot(apiServer, wst, o, log); err != nil {
		return err
	}
	nb, err := startNetboot(o.flags, o.netboot, o.apiURL, o.conductor, st, apiServer, log)
	if err != nil {
		return err
	}
	defer nb.Stop()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	mux.Handle("/", apiServer)
	handler, err := o.trust.guard(mux, ln.Addr(), log)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	// Event streams never go idle: end them so that Shutdown can finish.
	srv.RegisterOnShutdown(bus.Close)
	log.Info("kiln controller listening", "addr", ln.Addr().String(), "db", o.db, "conductor", o.conductor)
	errc := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()

	select {
	case err := <-errc:
		return fmt.Errorf("serve API: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	defer func() {
		if err := shutdownDrivers(shutdownCtx); err != nil {
			log.Warn("log out of BMC sessions", "err", err)
		}
	}()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("graceful shutdown incomplete", "err", err)
	}
	log.Info("stopped")
	return nil
}

// mountBoot serves network boot beside the API: per-MAC iPXE scripts at
// /boot/boot.ipxe and the agent's kernel, initramfs and ISOs at /boot/files/.
func mountBoot(a *api.Server, st store.Store, o serveOptions, log *slog.Logger) error {
	var unknown boot.Action
	switch o.bootUnknown {
	case "local":
		unknown = boot.BootLocal
	case "discovery":
		unknown = boot.Discovery
	default:
		return fmt.Errorf("--boot-unknown must be local or discovery, not %q", o.bootUnknown)
	}
	files := strings.TrimSuffix(o.apiURL, "/") + "/boot/files"
	backend := &netboot.Backend{Store: st, FilesURL: files, RamdiskURL: strings.TrimSuffix(o.apiURL, "/") + "/boot/ramdisk",
		PerNodeRamdisk: len(o.trust.agentCAPEM) > 0}
	scripts := boot.NewScriptHandler(boot.Config{
		APIURL: o.apiURL, KernelURL: files + "/kiln-agent.kernel", RamdiskURL: files + "/kiln-agent.initramfs",
		Console: o.bootConsole, Unknown: unknown, Log: log,
	}, backend)
	e := a.Echo()
	e.GET("/boot/boot.ipxe", echo.WrapHandler(scripts))
	e.HEAD("/boot/boot.ipxe", echo.WrapHandler(scripts))
	var fs http.Handler
	if _, err := os.Stat(o.bootDir); err != nil {
		// The default ./out is absent on every quick-start run, which needs no
		// boot files: say so only at debug level then.
		lvl := slog.LevelWarn
		if !o.bootDirSet {
			lvl = slog.LevelDebug
		}
		log.Log(context.Background(), lvl, "boot files directory missing: /boot/files/ answers 404 until kiln serve restarts with it (make initramfs builds ./out)", "dir", o.bootDir)
		fs = http.NotFoundHandler()
	} else if fs, err = boot.NewFileServer(o.bootDir); err != nil {
		return fmt.Errorf("serve boot files from %s: %w", o.bootDir, err)
	}
	h := echo.WrapHandler(http.StripPrefix("/boot/files", fs))
	e.GET("/boot/files/*", h)
	e.HEAD("/boot/files/*", h)
	// Per-node ramdisks: the agent initramfs with the node's NMState network
	// data appended, for hosts that have no DHCP.
	rd := echo.WrapHandler(http.StripPrefix("/boot/ramdisk", boot.NewRamdiskHandler(boot.RamdiskConfig{
		Ramdisk: filepath.Join(o.bootDir, "kiln-agent.initramfs"), AgentCA: o.trust.agentCAPEM, Log: log}, backend)))
	e.GET("/boot/ramdisk/:node", rd)
	e.HEAD("/boot/ramdisk/:node", rd)
	return nil
}
