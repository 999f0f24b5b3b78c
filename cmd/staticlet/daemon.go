package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/desired"
	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/diskpressure"
	"github.com/staticlet/staticlet/internal/filewatch"
	"github.com/staticlet/staticlet/internal/health"
	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/kubeapi"
	"github.com/staticlet/staticlet/internal/kubeletconfig"
	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/metrics"
	"github.com/staticlet/staticlet/internal/nodeshutdown"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet"
	"github.com/staticlet/staticlet/internal/reconcile"
	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/storagelimit"
	"github.com/staticlet/staticlet/internal/watch"
)

// runDaemon runs staticlet until ctx ends or a component fails. It checks
// cfg, builds each component from its part of cfg in the order their
// dependencies need (the log daemon, the runtime, the image directory,
// the prober, the reconciler, the sources, the status server), then runs
// them all under one errgroup.
func runDaemon(ctx context.Context, cfg runConfig) error {
	logger, err := newLogger(cfg.logLevel)
	if err != nil {
		return err
	}
	routeLibraryLogs(logger)
	cfg.configNotes.Log(logger)
	if err := cfg.check(); err != nil {
		return err
	}
	logUnwatchedSignals(cfg.node, logger)
	nodeIPs, err := nodeAddresses(cfg.node.ip, cfg.network.bridge)
	if err != nil {
		return err
	}
	nodeLabels, err := parseNodeLabels(cfg.node.labels)
	if err != nil {
		return err
	}
	network, err := networkConfig(cfg.network)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logDriverArgs, err := logDriver(cfg.logs.maxSize, cfg.logs.maxFiles)
	if err != nil {
		return err
	}
	logBudget, err := parseLogBudget(cfg.logs.maxTotal)
	if err != nil {
		return err
	}
	logInstall, err := installLogDaemon(cfg.rootDir)
	if err != nil {
		return err
	}
	started := time.Now()
	store := status.NewStore()
	// The CDI devices: read now, watched under the errgroup below.
	// A change of the specs has the merger judge the pods' devices again,
	// and wakes the containers waiting for devices (some may be new).
	devicesChanged, specsChanged := make(chan struct{}, 1), make(chan struct{}, 1)
	deviceRegistry := devices.New(devices.Config{SpecDirs: cfg.runtime.cdiSpecDirs, Logger: logger, Changed: func() {
		for _, ch := range []chan struct{}{devicesChanged, specsChanged} {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}})
	nodeDevices := deviceLister(deviceRegistry)
	meters := newMetrics(store, nodeDevices)
	// imports is set before anything can call AwaitImports: the runtime
	// resolves no image before the errgroup below starts.
	var imports *images.Dir
	sc := cfg.sandboxConfig()
	sc.Logs.DriverArgs, sc.Logs.Driver, sc.Logs.Ensure = logDriverArgs, logInstall.Driver, logInstall.Ensure
	sc.Node.HostIPs, sc.Network = nodeIPs, network
	sc.Images.AwaitImports = func(ctx context.Context) bool { return imports.AwaitIdle(ctx) }
	sc.Images.Pulled, sc.Logger = meters.ImagePulled, logger
	sc.Devices = deviceRegistry
	rt, err := openRuntime(ctx, sc)
	if err != nil {
		return err
	}
	defer rt.Close()
	imports = images.New(cfg.importDirConfig(imageImporter{rt.Images()}, logger))

	rep := reporter{store: store, metrics: meters, logger: logger}
	gcConfig, err := cfg.imageGCConfig(rt.Images(), rep, meters.ImageCollected, logger)
	if err != nil {
		return err
	}
	imageGC := images.NewGC(gcConfig)
	prober := health.New(health.Config{Runtime: probeRuntime{rt}, Ran: meters.ProbeRan, Logger: logger})
	// The files whose changes restart containers (restart-on-change),
	// looked at again as often as the manifests.
	files := filewatch.New(filewatch.Config{Resync: cfg.dirSource.fileCheckFrequency, Logger: logger})
	arrived := make(chan []string)
	devicesToTry := make(chan []string)
	rec := reconcile.New(reconcile.Config{
		Runtime:  rt,
		Reporter: rep,
		Prober:   prober,
		Resync:   cfg.dirSource.fileCheckFrequency,
		HostIPs:  nodeIPs,
		Logger:   logger,

		ImagesArrived: arrived,
		DevicesFreed:  devicesToTry,
		Watcher:       files,
		FileChanges:   files.Changes(),
	})
	sources, err := manifestSources(cfg, logger, meters.URLPolled)
	if err != nil {
		return err
	}
	// Container logs, for the status socket and the Kubernetes API alike.
	podLogs := logOpener(store, cfg.logs.dir)
	server := status.NewServer(status.ServerConfig{
		Socket:     cfg.status.socket,
		Group:      cfg.status.group,
		Store:      store,
		Health:     daemonHealth(rec, rt),
		Logs:       podLogs,
		Exec:       execInContainer(rt),
		Images:     imageLister(imageGC),
		Devices:    nodeDevices,
		Stats:      statsReader(rt),
		Restart:    restarter(rec),
		Metrics:    meters.Handler(),
		Instrument: meters.InstrumentHTTP,
		Logger:     logger,
	})
	healthzLn, metricsLn, err := listenEndpoints(cfg.status)
	if err != nil {
		return err
	}
	api, err := listenKubeAPI(cfg, kubeapi.Config{Store: store, NodeName: cfg.nodeName, Version: version,
		Health: daemonHealth(rec, rt), Logger: logger,
		Stats: statsReader(rt), NodeUsage: nodeUsage(rt.NodeWorkingSet), Devices: nodeDevices, Logs: podLogs,
		Exec: execInContainer(rt), DialPod: podDialer(rt), Heartbeat: rec.Heartbeat, LeaseDurationSeconds: cfg.node.leaseSeconds})
	if err != nil {
		return err
	}
	store.SetNode(readNode(ctx, nodeFacts{name: cfg.nodeName, started: started, addresses: nodeIPs, labels: nodeLabels,
		maxPods: cfg.maxPods, apiPort: api.port()},
		cfg.rootDir, rt.Version, logger))
	notifier := status.NewNotifier(status.NotifierConfig{Store: store, Alive: rec.Alive, Logger: logger})
	shutdownConfig := cfg.shutdown
	shutdownConfig.Node = nodeShutdown{rec: rec, store: store}
	shutdownConfig.Logger = logger
	shutdown := nodeshutdown.New(shutdownConfig)
	// Ephemeral storage limits: containers over one are killed, and the
	// reconciler restarts them as after any exit.
	guard := storagelimit.New(storagelimit.Config{Meter: rt, Pods: store, Events: rep, Logger: logger})

	// The pipeline, in the order data flows: sources, merger, admission
	// (under --max-pods), reconciler; then what feeds the reconciler
	// besides (task exits, probe verdicts, file changes, imported
	// images) and what reports.
	snapshots := make(chan watch.Snapshot)
	desiredSets := make(chan []*pod.Pod)
	exits := make(chan pod.TaskExit, 64)

	g, ctx := errgroup.WithContext(ctx)
	names := make([]string, len(sources))
	for i, src := range sources {
		names[i] = src.Name()
		g.Go(func() error { return src.Run(ctx, snapshots) })
	}
	merger := desired.NewMerger(desired.MergerConfig{Sources: names, Manifests: manifestStore{store}, Objects: store, Desired: imageGC,
		Devices: deviceRegistry, DevicesChanged: devicesChanged, Logger: logger})
	g.Go(func() error { return merger.Run(ctx, snapshots, desiredSets) })
	g.Go(func() error { return logd.Keep(ctx, logInstall, logDaemonCheck, logger) })
	g.Go(func() error { return deviceRegistry.Run(ctx) })
	g.Go(func() error {
		return wakeForDevices(ctx, rt.DevicesFreed(), specsChanged, deviceRegistry.Kinds, devicesToTry)
	})
	g.Go(func() error { return runLogBudget(ctx, cfg.logs.dir, logBudget, logger) })
	g.Go(func() error { return newDiskMonitor(cfg, store, logger).Run(ctx) })
	g.Go(func() error { return rt.Exits(ctx, exits) })
	g.Go(func() error { return prober.Run(ctx) })
	g.Go(func() error { return files.Run(ctx) })
	g.Go(func() error { return guard.Run(ctx) })
	importUpdates := make(chan images.Update)
	g.Go(func() error { return imports.Run(ctx, importUpdates) })
	g.Go(func() error { return reportImports(ctx, importUpdates, importSinks{store, rep, imageGC}, arrived) })
	g.Go(func() error { return imageGC.Run(ctx) })
	admitted := desiredSets
	if cfg.maxPods > 0 {
		admitted = make(chan []*pod.Pod)
		admission := desired.NewAdmission(desired.AdmissionConfig{Max: cfg.maxPods, Events: rep})
		g.Go(func() error { return admission.Run(ctx, desiredSets, admitted) })
	}
	g.Go(func() error { return rec.Run(ctx, admitted, exits, prober.Verdicts()) })
	if healthzLn != nil {
		g.Go(func() error { return server.ServeHealthz(ctx, healthzLn) })
	}
	if metricsLn != nil {
		g.Go(func() error { return server.ServeMetrics(ctx, metricsLn) })
	}
	g.Go(func() error { return server.Run(ctx) })
	if api != nil {
		g.Go(func() error { return api.Run(ctx) })
	}
	g.Go(func() error { return notifier.Run(ctx) })
	g.Go(func() error { return shutdown.Run(ctx) })
	logger.Info("staticlet started", "version", version, "manifest-dir", cfg.dirSource.path, "node", cfg.nodeName,
		"containerd", cfg.runtime.containerdAddress, "cgroups", rt.CgroupMode(), "cgroup-driver", cfg.runtime.cgroupDriver)
	err = g.Wait()
	logger.Info("staticlet stopped; pods keep running")
	return err
}

// wakeForDevices tells out the kinds of CDI devices that containers
// waiting for devices (InsufficientDevices) may find free now: those the
// runtime freed (freed), and every kind the specs name when they changed
// (changed), as a device may have been added. It returns when ctx ends.
func wakeForDevices(ctx context.Context, freed <-chan []string, changed <-chan struct{}, kinds func() []devices.Kind, out chan<- []string) error {
	for {
		var names []string
		select {
		case <-ctx.Done():
			return nil
		case names = <-freed:
		case <-changed:
			for _, k := range kinds() {
				names = append(names, k.Name)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case out <- names:
		}
	}
}

// check completes cfg where a flag's default needs the host (the node
// name) or parsing (the disk pressure thresholds), and checks what the
// flags' types cannot: the shutdown grace periods, the image garbage
// collection policy, the eviction thresholds and the cgroup driver.
func (cfg *runConfig) check() error {
	var err error
	if cfg.nodeName == "" {
		if cfg.nodeName, err = os.Hostname(); err != nil {
			return fmt.Errorf("reading the host name for --node-name: %w", err)
		}
	}
	cfg.nodeName = strings.ToLower(cfg.nodeName)
	if err := kubeletconfig.CheckShutdownGrace(cfg.shutdown.GracePeriod, cfg.shutdown.CriticalGracePeriod); err != nil {
		return fmt.Errorf("--shutdown-grace-period %v, --shutdown-grace-period-critical-pods %v: %w",
			cfg.shutdown.GracePeriod, cfg.shutdown.CriticalGracePeriod, err)
	}
	if err := cfg.images.gc.Validate(); err != nil {
		return err
	}
	if cfg.node.diskThresholds, cfg.node.unwatchedSignals, err = diskpressure.ParseThresholds(cfg.node.evictionHard); err != nil {
		return fmt.Errorf("--eviction-hard: %w", err)
	}
	if cfg.runtime.cgroupDriver != "cgroupfs" && cfg.runtime.cgroupDriver != "systemd" {
		return fmt.Errorf("--cgroup-driver %q: want cgroupfs or systemd", cfg.runtime.cgroupDriver)
	}
	return nil
}

// installLogDaemon puts the node's log daemon and its forwarder in place
// under rootDir: containers log through it, the shim running a forwarder
// per container that hands the daemon its pipes.
func installLogDaemon(rootDir string) (logd.Install, error) {
	exe, err := os.Executable()
	if err != nil {
		return logd.Install{}, fmt.Errorf("finding staticlet's binary for the log daemon: %w", err)
	}
	return logd.Setup(rootDir, exe)
}

// sandboxConfig is the runtime's configuration from the flags; runDaemon
// adds what other components provide (logging, the host's address and
// network, image imports, metrics).
func (cfg *runConfig) sandboxConfig() sandbox.Config {
	return sandbox.Config{
		Address:   strings.TrimPrefix(cfg.runtime.containerdAddress, "unix://"),
		Namespace: cfg.runtime.containerdNS,
		RootDir:   cfg.rootDir,
		Logs:      sandbox.LogConfig{Dir: cfg.logs.dir},
		Node: sandbox.NodeConfig{
			ResolvConf:           cfg.runtime.resolvConf,
			AllowedUnsafeSysctls: cfg.runtime.unsafeSysctls,
		},
		Images: images.StoreConfig{
			CredentialsFile:   cfg.images.credentials,
			RegistryConfigDir: cfg.images.registryConfigDir,
			Namespaces:        imageNamespaces(cfg.images.namespaces),
		},
		Cgroups: cgroups.Config{
			NoPodCgroups: !cfg.runtime.cgroupsPerQOS,
			Systemd:      cfg.runtime.cgroupDriver == "systemd",
			PodPidsLimit: cfg.runtime.podPidsLimit,
		},
	}
}

// openRuntime connects to containerd and sweeps what a staticlet killed
// in the middle of a call left: its leases, namespaces pinned for a
// sandbox it never created.
func openRuntime(ctx context.Context, sc sandbox.Config) (*sandbox.Runtime, error) {
	rt, err := sandbox.New(ctx, sc)
	if err != nil {
		return nil, err
	}
	if err := rt.Sweep(ctx); err != nil {
		sc.Logger.Warn("sweeping what an earlier staticlet left", "err", err)
	}
	return rt, nil
}

// importDirConfig configures the image import directory: --image-import-dir,
// by default <root-dir>/images, read again as often as the manifests.
func (cfg *runConfig) importDirConfig(importer images.Importer, logger *slog.Logger) images.Config {
	path := cfg.images.importDir
	if path == "" {
		path = filepath.Join(cfg.rootDir, "images")
	}
	return images.Config{
		Path:      path,
		StateFile: filepath.Join(cfg.rootDir, importStateFile),
		Importer:  importer,
		Resync:    cfg.dirSource.fileCheckFrequency,
		Logger:    logger,
	}
}

// imageGCConfig configures image garbage collection from the flags, every
// DefaultGCPeriod (the kubelet's) unless the test hook imageGCPeriodEnv
// says otherwise.
func (cfg *runConfig) imageGCConfig(store *images.Store, events images.EventSink, collected func(string, int64), logger *slog.Logger) (images.GCConfig, error) {
	gc := images.GCConfig{Policy: cfg.images.gc, Store: store, Node: cfg.nodeName, Events: events, Collected: collected, Logger: logger}
	var err error
	gc.Period, err = durationEnv(imageGCPeriodEnv)
	return gc, err
}

// durationEnv reads the duration a testing hook's environment variable
// names; 0 when it is unset.
func durationEnv(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// daemonHealth is /healthz: the reconcile loop turns and containerd
// answers.
func daemonHealth(rec *reconcile.Reconciler, rt *sandbox.Runtime) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if !rec.Alive() {
			return errors.New("the reconcile loop is stuck")
		}
		return rt.Ping(ctx)
	}
}

// listenEndpoints listens on --healthz-address and --metrics-address,
// each nil when off, before anything runs, so that a taken port fails the
// start.
func listenEndpoints(cfg statusConfig) (healthz, metrics net.Listener, err error) {
	healthz, err = listenTCP("healthz-address", cfg.healthzAddress)
	if err != nil {
		return nil, nil, err
	}
	metrics, err = listenTCP("metrics-address", cfg.metricsAddress)
	if err != nil {
		if healthz != nil {
			healthz.Close()
		}
		return nil, nil, err
	}
	return healthz, metrics, nil
}

// logDaemonCheck is how often staticlet makes sure the log daemon runs
// where a container needs it.
const logDaemonCheck = 5 * time.Second

// stepPauseEnv, a testing hook, names a duration to pause between the steps
// of each pod's network setup, so a test can kill staticlet in the middle.
const stepPauseEnv = "STATICLET_TEST_NETWORK_STEP_PAUSE"

// imageGCPeriodEnv, a testing hook, names how often images are collected,
// so that a test need not wait the kubelet's five minutes.
const imageGCPeriodEnv = "STATICLET_TEST_IMAGE_GC_PERIOD"

// probeRuntime is the runtime as health's probes use it.
type probeRuntime struct{ rt *sandbox.Runtime }

func (p probeRuntime) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	res, err := p.rt.Exec(ctx, id, cmd, timeout)
	return res.ExitCode, res.Output, err
}

func (p probeRuntime) DialPod(ctx context.Context, id, sandboxID, network, addr string) (net.Conn, error) {
	return p.rt.DialPod(ctx, id, sandboxID, network, addr)
}

// reporter hands the reconciler's observations to the status store and
// logs events once, here.
type reporter struct {
	store   *status.Store
	metrics *metrics.Metrics
	logger  *slog.Logger
}

func (r reporter) SetPod(p *v1.Pod) {
	r.metrics.PodUpdated(p)
	r.store.SetPod(p)
}

func (r reporter) DeletePod(key pod.Key) {
	r.metrics.ForgetPod(key)
	r.store.DeletePod(key)
}

func (r reporter) SetReady() { r.store.SetReady() }
func (r reporter) Event(e pod.Event) {
	level := slog.LevelInfo
	if e.Type == pod.EventWarning {
		level = slog.LevelWarn
	}
	if e.Pod == "" {
		r.logger.Log(context.Background(), level, e.Message, "object", e.Object, "reason", e.Reason)
	} else {
		r.logger.Log(context.Background(), level, e.Message, "pod", e.Pod, "container", e.Container, "reason", e.Reason)
	}
	r.store.Event(e)
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if underJournal(os.Stderr) {
		return slog.New(newJournalHandler(os.Stderr, l)), nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// hostIP returns the node's first global IPv4 address, not the pod
// bridge's, reported as the pods' hostIP.
func hostIP(podBridge string) string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, iface := range ifaces {
		if iface.Name == podBridge {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// imageNamespaces is --image-namespaces without blanks and empty entries.
func imageNamespaces(flag []string) []string {
	var out []string
	for _, ns := range flag {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// networkConfig is the pod network's configuration from the flags.
func networkConfig(cfg podNetworkConfig) (*podnet.Config, error) {
	n := &podnet.Config{Bridge: cfg.bridge, Masquerade: cfg.masquerade, NftTable: cfg.nftTable}
	if len(n.Bridge) == 0 || len(n.Bridge) > 15 {
		return nil, fmt.Errorf("--pod-bridge %q: a link name is 1 to 15 bytes", n.Bridge)
	}
	for _, c := range cfg.cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("--pod-cidr: %w", err)
		}
		n.CIDRs = append(n.CIDRs, p)
	}
	var err error
	if n.StepPause, err = durationEnv(stepPauseEnv); err != nil {
		return nil, err
	}
	return n, nil
}
