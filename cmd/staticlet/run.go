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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/desired"
	"github.com/staticlet/staticlet/internal/filewatch"
	"github.com/staticlet/staticlet/internal/health"
	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/metrics"
	"github.com/staticlet/staticlet/internal/nodeshutdown"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet"
	"github.com/staticlet/staticlet/internal/reconcile"
	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/watch"
)

// runConfig is the daemon's configuration, from flags and --config: the
// settings of the daemon as a whole, then one group per component.
type runConfig struct {
	configFile  string
	configNotes *configFile // what --config has to say, logged once there is a logger
	logLevel    string
	nodeName    string
	rootDir     string
	maxPods     int

	dirSource dirSourceConfig
	urlSource urlSourceConfig
	runtime   runtimeConfig
	images    imageConfig
	logs      containerLogConfig
	network   podNetworkConfig
	status    statusConfig
	// shutdown holds the grace periods; runDaemon adds the rest.
	shutdown nodeshutdown.Config
}

// dirSourceConfig configures the manifest directory source. Its period
// is also the reconciler's and the image directory's resync.
type dirSourceConfig struct {
	path               string // a directory or one file
	fileCheckFrequency time.Duration
}

// urlSourceConfig configures the manifest URL source, which --config's
// staticPodURL, staticPodURLHeader and httpCheckFrequency also set.
type urlSourceConfig struct {
	url                string   // none if empty
	headers            []string // "Name:Value"
	caFile             string
	httpCheckFrequency time.Duration
}

// runtimeConfig configures the containerd runtime (sandbox.Config) beyond
// images, logs and the network.
type runtimeConfig struct {
	containerdAddress string // unix:// optional
	containerdNS      string
	resolvConf        string
	unsafeSysctls     []string
	cgroupsPerQOS     bool
	cgroupDriver      string // cgroupfs or systemd
	podPidsLimit      int64  // -1: none
}

// imageConfig configures where images come from: registries, the
// archives imported from a directory, and other containerd namespaces.
type imageConfig struct {
	credentials       string
	registryConfigDir string
	importDir         string   // default <root-dir>/images
	namespaces        []string // none if empty
}

// containerLogConfig configures containers' logs: where they are written
// (and read back from by the status socket), and their rotation.
type containerLogConfig struct {
	dir      string
	maxSize  string // a quantity
	maxFiles int
}

// podNetworkConfig is the pod network as given, before networkConfig
// checks it.
type podNetworkConfig struct {
	bridge     string
	cidrs      []string
	masquerade bool
	nftTable   string
}

// statusConfig configures the status socket and the TCP healthz and
// metrics endpoints.
type statusConfig struct {
	socket         string
	group          string // may read the socket; root only if empty
	healthzAddress string // off if empty
	metricsAddress string // off if empty
}

// defaultPodCIDR is the pod range when --pod-cidr is not given. It is
// clear of docker's bridge (172.17.0.0/16) and address pools
// (172.17-31.0.0/16, 192.168.0.0/16), podman's 10.88.0.0/16 and the
// 10.89.x.0/24 networks it creates next, cri-o's 10.85.0.0/16, flannel's
// 10.244.0.0/16, k3s's 10.42.0.0/16 and kubeadm's service range
// 10.96.0.0/12, so that staticlet can share a node with any of them; a /24
// holds 253 pods, twice the kubelet's default maxPods.
const defaultPodCIDR = "10.213.0.0/24"

// logDaemonCheck is how often staticlet makes sure the log daemon runs.
const logDaemonCheck = 5 * time.Second

// stepPauseEnv, a testing hook, names a duration to pause between the steps
// of each pod's network setup, so a test can kill staticlet in the middle.
const stepPauseEnv = "STATICLET_TEST_NETWORK_STEP_PAUSE"

func runCommand() *cobra.Command {
	var cfg runConfig
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pods whose manifests are in --manifest-dir (the daemon)",
		Long: `run watches --manifest-dir (a directory of Pod manifests, or one file) and
keeps a pod running through containerd for each Pod it defines, and for
each Pod --manifest-url serves, if given. Editing a file updates its pod;
removing it stops the pod. Stopping staticlet leaves
the pods running; starting it again adopts them without restarting them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadKubeletConfig(cmd.Flags(), &cfg); err != nil {
				return err
			}
			return runDaemon(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.dirSource.path, "manifest-dir", "/etc/kubernetes/manifests", "directory of Pod manifests, or one manifest file")
	f.DurationVar(&cfg.dirSource.fileCheckFrequency, "file-check-frequency", 20*time.Second, "how often the manifest directory is re-read in full")
	f.StringVar(&cfg.runtime.containerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd's socket (unix:// optional)")
	f.StringVar(&cfg.runtime.containerdNS, "containerd-namespace", "staticlet", "containerd namespace for staticlet's containers")
	f.StringVar(&cfg.rootDir, "root-dir", "/var/lib/staticlet", "directory for pod state")
	f.StringVar(&cfg.status.socket, "status-socket", defaultStatusSocket, "unix socket serving the status API")
	f.StringVar(&cfg.status.group, "status-socket-group", "", "group allowed to read the status socket (mode 0660); root only if empty")
	f.StringVar(&cfg.logs.dir, "pod-logs-dir", "/var/log/pods", "directory for container logs")
	f.StringVar(&cfg.logs.maxSize, "container-log-max-size", "10Mi", "size at which a container's log file is rotated (a quantity: 10Mi, 500Ki)")
	f.IntVar(&cfg.logs.maxFiles, "container-log-max-files", 5, "log files kept per container, the live one included (at least 2)")
	f.StringVar(&cfg.nodeName, "node-name", "", "node name appended to pod names (default: the host name)")
	f.StringVar(&cfg.runtime.resolvConf, "resolv-conf", "/etc/resolv.conf", "resolver configuration that pods' /etc/resolv.conf starts from")
	f.StringSliceVar(&cfg.runtime.unsafeSysctls, "allowed-unsafe-sysctls", nil, "sysctls outside the safe set that pods may set (patterns like 'kernel.msg*' allowed)")
	f.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&cfg.network.bridge, "pod-bridge", "staticlet0", "host bridge that pods off the host network are connected to")
	f.StringSliceVar(&cfg.network.cidrs, "pod-cidr", []string{defaultPodCIDR}, "pod address range; repeat or comma-separate an IPv4 and an IPv6 range for dual stack")
	f.BoolVar(&cfg.network.masquerade, "masquerade", true, "masquerade pods' traffic to outside the pod ranges behind the host's address (enables IP forwarding)")
	f.StringVar(&cfg.network.nftTable, "nftables-table", "staticlet", "nftables table (family inet) for the masquerade and hostPort rules")
	f.StringVar(&cfg.urlSource.url, "manifest-url", "", "URL polled for Pod manifests, besides --manifest-dir")
	f.StringArrayVar(&cfg.urlSource.headers, "manifest-url-header", nil, "header 'Name:Value' sent with every --manifest-url request (repeatable; values are never logged)")
	f.DurationVar(&cfg.urlSource.httpCheckFrequency, "http-check-frequency", 20*time.Second, "how often --manifest-url is polled (less up to a fifth, at random)")
	f.StringVar(&cfg.urlSource.caFile, "manifest-url-ca", "", "PEM file of the CAs an https --manifest-url is verified against, instead of the system's")
	f.StringVar(&cfg.configFile, "config", "", "a kubelet.config.k8s.io/v1beta1 KubeletConfiguration file; flags given on the command line win over it")
	f.StringVar(&cfg.status.healthzAddress, "healthz-address", "", "host:port serving GET /healthz over TCP (e.g. 127.0.0.1:10248; a port alone is on 127.0.0.1); off if empty")
	f.StringVar(&cfg.status.metricsAddress, "metrics-address", "", "host:port serving GET /metrics (Prometheus) over TCP (e.g. 127.0.0.1:10255; a port alone is on 127.0.0.1); off if empty. "+
		"The status socket always serves it")
	f.StringVar(&cfg.images.credentials, "image-credentials", "", "docker config.json with registry credentials, read instead of the kubelet's search path (--root-dir, ~/.docker, /.docker)")
	f.StringVar(&cfg.images.registryConfigDir, "registry-config-dir", "", "directory of containerd-style HOST/hosts.toml files: mirrors, CA files, plain HTTP")
	f.StringVar(&cfg.images.importDir, "image-import-dir", "", "directory of image archives (docker save, OCI; plain, gzip or zstd) and OCI layouts imported into containerd (default <root-dir>/images)")
	f.StringSliceVar(&cfg.images.namespaces, "image-namespaces", []string{"k8s.io"}, "other containerd namespaces whose images are used, without a pull, when staticlet's lacks one "+
		"(k8s.io: kubeadm's and crictl's pulls); comma-separated, empty for none")
	f.DurationVar(&cfg.shutdown.GracePeriod, "shutdown-grace-period", 0, "how long the machine's shutdown waits for the pods to stop, through a systemd-logind delay inhibitor lock (0: off)")
	f.DurationVar(&cfg.shutdown.CriticalGracePeriod, "shutdown-grace-period-critical-pods", 0,
		"the part of --shutdown-grace-period kept for critical pods (system-node-critical and system-cluster-critical), stopped last")
	f.StringVar(&cfg.runtime.cgroupDriver, "cgroup-driver", "cgroupfs", "how pod and container cgroups are made: cgroupfs (staticlet and runc write them) or systemd "+
		"(slices under <containerd namespace>.slice and container scopes, through systemd, as the kubelet's systemd driver; needs systemd as the init system)")
	f.Int64Var(&cfg.runtime.podPidsLimit, "pod-max-pids", -1, "most processes each pod may have (its cgroup's pids.max); -1: no limit")
	f.BoolVar(&cfg.runtime.cgroupsPerQOS, "cgroups-per-qos", true, "make a cgroup per QoS class and per pod, as the kubelet does; false puts containers' cgroups directly under /<containerd namespace>")
	f.IntVar(&cfg.maxPods, "max-pods", 0, "most pods run at once; the others are refused with an OutOfpods event (0: no limit)")
	// The kubelet's names, so that its habits and unit files carry over.
	alias(f, "pod-manifest-path", "manifest-dir")
	alias(f, "container-runtime-endpoint", "containerd-address")
	alias(f, "hostname-override", "node-name")
	return cmd
}

// alias makes the kubelet's flag name old set the same value as name.
func alias(f *pflag.FlagSet, old, name string) {
	target := f.Lookup(name)
	f.Var(target.Value, old, "alias of --"+name)
	f.Lookup(old).Hidden = true
}

func runDaemon(ctx context.Context, cfg runConfig) error {
	logger, err := newLogger(cfg.logLevel)
	if err != nil {
		return err
	}
	cfg.configNotes.log(logger)
	if cfg.nodeName == "" {
		if cfg.nodeName, err = os.Hostname(); err != nil {
			return fmt.Errorf("reading the host name for --node-name: %w", err)
		}
	}
	cfg.nodeName = strings.ToLower(cfg.nodeName)
	if err := checkShutdownGrace(cfg.shutdown.GracePeriod, cfg.shutdown.CriticalGracePeriod); err != nil {
		return fmt.Errorf("--shutdown-grace-period %v, --shutdown-grace-period-critical-pods %v: %w",
			cfg.shutdown.GracePeriod, cfg.shutdown.CriticalGracePeriod, err)
	}
	if cfg.runtime.cgroupDriver != "cgroupfs" && cfg.runtime.cgroupDriver != "systemd" {
		return fmt.Errorf("--cgroup-driver %q: want cgroupfs or systemd", cfg.runtime.cgroupDriver)
	}
	nodeIP := hostIP(cfg.network.bridge)
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
	// Containers log through the node's log daemon: the shim runs a
	// forwarder per container that hands the daemon its pipes.
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding staticlet's binary for the log daemon: %w", err)
	}
	logInstall, err := logd.Setup(cfg.rootDir, exe)
	if err != nil {
		return err
	}
	store := status.NewStore()
	meters := newMetrics(store)
	// imports is set before anything can call AwaitImports: the runtime
	// resolves no image before the errgroup below starts.
	var imports *images.Dir
	rt, err := sandbox.New(ctx, sandbox.Config{
		Address:   strings.TrimPrefix(cfg.runtime.containerdAddress, "unix://"),
		Namespace: cfg.runtime.containerdNS,
		RootDir:   cfg.rootDir,
		Logs: sandbox.LogConfig{
			Dir:        cfg.logs.dir,
			DriverArgs: logDriverArgs,
			Driver:     logInstall.Driver,
		},
		Node: sandbox.NodeConfig{
			HostIP:               nodeIP,
			ResolvConf:           cfg.runtime.resolvConf,
			AllowedUnsafeSysctls: cfg.runtime.unsafeSysctls,
		},
		Images: images.StoreConfig{
			CredentialsFile:   cfg.images.credentials,
			RegistryConfigDir: cfg.images.registryConfigDir,
			Namespaces:        imageNamespaces(cfg.images.namespaces),
			AwaitImports:      func(ctx context.Context) bool { return imports.AwaitIdle(ctx) },
			Pulled:            meters.ImagePulled,
		},
		Network: network,
		Cgroups: cgroups.Config{
			NoPodCgroups: !cfg.runtime.cgroupsPerQOS,
			Systemd:      cfg.runtime.cgroupDriver == "systemd",
			PodPidsLimit: cfg.runtime.podPidsLimit,
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	defer rt.Close()
	// What a staticlet killed in the middle of a call left: its leases,
	// namespaces pinned for a sandbox it never created.
	if err := rt.Sweep(ctx); err != nil {
		logger.Warn("sweeping what an earlier staticlet left", "err", err)
	}

	if cfg.images.importDir == "" {
		cfg.images.importDir = filepath.Join(cfg.rootDir, "images")
	}
	imports = images.New(images.Config{
		Path:      cfg.images.importDir,
		StateFile: filepath.Join(cfg.rootDir, importStateFile),
		Importer:  imageImporter{rt.Images()},
		Resync:    cfg.dirSource.fileCheckFrequency,
		Logger:    logger,
	})
	arrived := make(chan []string)

	rep := reporter{store: store, metrics: meters, logger: logger}
	prober := health.New(health.Config{Runtime: probeRuntime{rt}, Ran: meters.ProbeRan, Logger: logger})
	// The files whose changes restart containers (restart-on-change),
	// looked at again as often as the manifests.
	files := filewatch.New(filewatch.Config{Resync: cfg.dirSource.fileCheckFrequency, Logger: logger})
	rec := reconcile.New(reconcile.Config{
		Runtime:  rt,
		Reporter: rep,
		Prober:   prober,
		Resync:   cfg.dirSource.fileCheckFrequency,
		HostIP:   nodeIP,
		Logger:   logger,

		ImagesArrived: arrived,
		Watcher:       files,
		FileChanges:   files.Changes(),
	})
	sources, err := manifestSources(cfg, logger, meters.URLPolled)
	if err != nil {
		return err
	}
	server := status.NewServer(status.ServerConfig{
		Socket: cfg.status.socket,
		Group:  cfg.status.group,
		Store:  store,
		Health: func(ctx context.Context) error {
			if !rec.Alive() {
				return errors.New("the reconcile loop is stuck")
			}
			return rt.Ping(ctx)
		},
		Logs:       logOpener(store, cfg.logs.dir),
		Exec:       execInContainer(rt),
		Images:     imageLister(rt.Images()),
		Stats:      statsReader(rt),
		Restart:    restarter(rec),
		Metrics:    meters.Handler(),
		Instrument: meters.InstrumentHTTP,
		Logger:     logger,
	})
	healthzLn, err := listenTCP("healthz-address", cfg.status.healthzAddress)
	if err != nil {
		return err
	}
	metricsLn, err := listenTCP("metrics-address", cfg.status.metricsAddress)
	if err != nil {
		if healthzLn != nil {
			healthzLn.Close()
		}
		return err
	}
	notifier := status.NewNotifier(status.NotifierConfig{Store: store, Alive: rec.Alive, Logger: logger})
	shutdownConfig := cfg.shutdown
	shutdownConfig.Node = nodeShutdown{rec: rec, store: store}
	shutdownConfig.Logger = logger
	shutdown := nodeshutdown.New(shutdownConfig)

	snapshots := make(chan watch.Snapshot)
	desiredSets := make(chan []*pod.Pod)
	exits := make(chan pod.TaskExit, 64)

	g, ctx := errgroup.WithContext(ctx)
	names := make([]string, len(sources))
	for i, src := range sources {
		names[i] = src.Name()
		g.Go(func() error { return src.Run(ctx, snapshots) })
	}
	merger := desired.NewMerger(desired.MergerConfig{Sources: names, Manifests: manifestStore{store}, Logger: logger})
	g.Go(func() error { return merger.Run(ctx, snapshots, desiredSets) })
	g.Go(func() error { return logd.Keep(ctx, logInstall, logDaemonCheck, logger) })
	g.Go(func() error { return rt.Exits(ctx, exits) })
	g.Go(func() error { return prober.Run(ctx) })
	g.Go(func() error { return files.Run(ctx) })
	importUpdates := make(chan images.Update)
	g.Go(func() error { return imports.Run(ctx, importUpdates) })
	g.Go(func() error { return reportImports(ctx, importUpdates, store, rep, arrived) })
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
	g.Go(func() error { return notifier.Run(ctx) })
	g.Go(func() error { return shutdown.Run(ctx) })
	logger.Info("staticlet started", "version", version, "manifest-dir", cfg.dirSource.path, "node", cfg.nodeName,
		"containerd", cfg.runtime.containerdAddress, "cgroups", rt.CgroupMode(), "cgroup-driver", cfg.runtime.cgroupDriver)
	err = g.Wait()
	logger.Info("staticlet stopped; pods keep running")
	return err
}

// reporter hands the reconciler's observations to the status store and
// logs events once, here.
// probeRuntime is the runtime as health's probes use it.
type probeRuntime struct{ rt *sandbox.Runtime }

func (p probeRuntime) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	res, err := p.rt.Exec(ctx, id, cmd, timeout)
	return res.ExitCode, res.Output, err
}

func (p probeRuntime) DialPod(ctx context.Context, id, sandboxID, network, addr string) (net.Conn, error) {
	return p.rt.DialPod(ctx, id, sandboxID, network, addr)
}

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
	r.logger.Log(context.Background(), level, e.Message, "pod", e.Pod, "container", e.Container, "reason", e.Reason)
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
	if v := os.Getenv(stepPauseEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", stepPauseEnv, err)
		}
		n.StepPause = d
	}
	return n, nil
}
