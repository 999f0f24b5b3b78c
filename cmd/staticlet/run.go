package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/reconcile"
	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/watch"
)

// runConfig is the daemon's configuration, from flags.
type runConfig struct {
	manifestDir        string
	fileCheckFrequency time.Duration
	containerdAddress  string
	containerdNS       string
	rootDir            string
	statusSocket       string
	statusGroup        string
	podLogsDir         string
	logMaxSize         string
	logMaxFiles        int
	nodeName           string
	resolvConf         string
	unsafeSysctls      []string
	logLevel           string
}

func runCommand() *cobra.Command {
	var cfg runConfig
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pods whose manifests are in --manifest-dir (the daemon)",
		Long: `run watches --manifest-dir (a directory of Pod manifests, or one file) and
keeps a pod running through containerd for each Pod it defines. Editing a
file updates its pod; removing it stops the pod. Stopping staticlet leaves
the pods running; starting it again adopts them without restarting them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDaemon(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.manifestDir, "manifest-dir", "/etc/kubernetes/manifests", "directory of Pod manifests, or one manifest file")
	f.DurationVar(&cfg.fileCheckFrequency, "file-check-frequency", 20*time.Second, "how often the manifest directory is re-read in full")
	f.StringVar(&cfg.containerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd's socket (unix:// optional)")
	f.StringVar(&cfg.containerdNS, "containerd-namespace", "staticlet", "containerd namespace for staticlet's containers")
	f.StringVar(&cfg.rootDir, "root-dir", "/var/lib/staticlet", "directory for pod state")
	f.StringVar(&cfg.statusSocket, "status-socket", defaultStatusSocket, "unix socket serving the status API")
	f.StringVar(&cfg.statusGroup, "status-socket-group", "", "group allowed to read the status socket (mode 0660); root only if empty")
	f.StringVar(&cfg.podLogsDir, "pod-logs-dir", "/var/log/pods", "directory for container logs")
	f.StringVar(&cfg.logMaxSize, "container-log-max-size", "10Mi", "size at which a container's log file is rotated (a quantity: 10Mi, 500Ki)")
	f.IntVar(&cfg.logMaxFiles, "container-log-max-files", 5, "log files kept per container, the live one included (at least 2)")
	f.StringVar(&cfg.nodeName, "node-name", "", "node name appended to pod names (default: the host name)")
	f.StringVar(&cfg.resolvConf, "resolv-conf", "/etc/resolv.conf", "resolver configuration that pods' /etc/resolv.conf starts from")
	f.StringSliceVar(&cfg.unsafeSysctls, "allowed-unsafe-sysctls", nil, "sysctls outside the safe set that pods may set (patterns like 'kernel.msg*' allowed)")
	f.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn or error")
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
	if cfg.nodeName == "" {
		if cfg.nodeName, err = os.Hostname(); err != nil {
			return fmt.Errorf("reading the host name for --node-name: %w", err)
		}
	}
	cfg.nodeName = strings.ToLower(cfg.nodeName)
	nodeIP := hostIP()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logDriverArgs, err := logDriver(cfg.logMaxSize, cfg.logMaxFiles)
	if err != nil {
		return err
	}
	rt, err := sandbox.New(ctx, sandbox.Config{
		Address:              strings.TrimPrefix(cfg.containerdAddress, "unix://"),
		Namespace:            cfg.containerdNS,
		RootDir:              cfg.rootDir,
		PodLogsDir:           cfg.podLogsDir,
		LogDriverArgs:        logDriverArgs,
		HostIP:               nodeIP,
		ResolvConf:           cfg.resolvConf,
		AllowedUnsafeSysctls: cfg.unsafeSysctls,
		Logger:               logger,
	})
	if err != nil {
		return err
	}
	defer rt.Close()
	// Namespaces pinned for a sandbox that a killed staticlet never created.
	if err := rt.Sweep(ctx); err != nil {
		logger.Warn("removing stale sandbox namespaces", "err", err)
	}

	store := status.NewStore()
	rec := reconcile.New(reconcile.Config{
		Runtime:  rt,
		Reporter: reporter{store: store, logger: logger},
		Resync:   cfg.fileCheckFrequency,
		HostIP:   nodeIP,
		Logger:   logger,
	})
	dir := watch.NewDir(watch.DirConfig{
		Path:   cfg.manifestDir,
		Resync: cfg.fileCheckFrequency,
		// A new or rewritten file is applied 10 ms after its last event; a
		// burst that removes or renames a file waits 50 ms, time enough for
		// an editor's rename-then-write to finish.
		QuietDebounce: 10 * time.Millisecond,
		Debounce:      50 * time.Millisecond,
		Decode: func(path string, data []byte) ([]*pod.Pod, error) {
			return pod.Decode(path, data, pod.Options{NodeName: cfg.nodeName, SourceKind: pod.SourceFile, Seen: time.Now()})
		},
		Logger: logger,
	})
	server := status.NewServer(status.ServerConfig{
		Socket: cfg.statusSocket,
		Group:  cfg.statusGroup,
		Store:  store,
		Health: func(ctx context.Context) error {
			if !rec.Alive() {
				return errors.New("the reconcile loop is stuck")
			}
			return rt.Ping(ctx)
		},
		Logs:   logOpener(store, cfg.podLogsDir),
		Logger: logger,
	})
	notifier := status.NewNotifier(status.NotifierConfig{Store: store, Alive: rec.Alive, Logger: logger})

	snapshots := make(chan watch.Snapshot)
	desired := make(chan []*pod.Pod)
	exits := make(chan pod.TaskExit, 64)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return dir.Run(ctx, snapshots) })
	g.Go(func() error { return merge(ctx, snapshots, desired, store, logger) })
	g.Go(func() error { return rt.Exits(ctx, exits) })
	g.Go(func() error { return rec.Run(ctx, desired, exits) })
	g.Go(func() error { return server.Run(ctx) })
	g.Go(func() error { return notifier.Run(ctx) })
	logger.Info("staticlet started", "version", version, "manifest-dir", cfg.manifestDir, "node", cfg.nodeName,
		"containerd", cfg.containerdAddress)
	err = g.Wait()
	logger.Info("staticlet stopped; pods keep running")
	return err
}

// merge turns source snapshots into desired sets for the reconciler and
// manifest results for the status API.
func merge(ctx context.Context, in <-chan watch.Snapshot, out chan<- []*pod.Pod, store *status.Store, logger *slog.Logger) error {
	// The sources log their own file errors; duplicates appear only here.
	logged := map[string]bool{}
	for {
		var snap watch.Snapshot
		select {
		case <-ctx.Done():
			return nil
		case snap = <-in:
		}
		pods, files := watch.Merge([]watch.Snapshot{snap})
		dups := map[string]bool{}
		for _, f := range files {
			var de *watch.DuplicateError
			if errors.As(f.Err, &de) {
				msg := f.Path + ": " + f.Err.Error()
				dups[msg] = true
				if !logged[msg] {
					logger.Warn("manifest ignored", "path", f.Path, "err", f.Err)
				}
			}
		}
		logged = dups
		ms := make([]status.Manifest, 0, len(files)+1)
		if snap.Err != nil {
			ms = append(ms, status.Manifest{Source: snap.Source, Error: snap.Err.Error()})
		}
		for _, f := range files {
			m := status.Manifest{Source: snap.Source, Path: f.Path}
			for _, p := range f.Pods {
				m.Pods = append(m.Pods, p.Key().String())
			}
			if f.Err != nil {
				m.Error = f.Err.Error()
			}
			ms = append(ms, m)
		}
		store.SetManifests(ms)
		logger.Debug("manifests read", "source", snap.Source, "files", len(snap.Files), "pods", len(pods))
		select {
		case <-ctx.Done():
			return nil
		case out <- pods:
		}
	}
}

// reporter hands the reconciler's observations to the status store and
// logs events once, here.
type reporter struct {
	store  *status.Store
	logger *slog.Logger
}

func (r reporter) SetPod(p *v1.Pod)      { r.store.SetPod(p) }
func (r reporter) DeletePod(key pod.Key) { r.store.DeletePod(key) }
func (r reporter) SetReady()             { r.store.SetReady() }
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
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// hostIP returns the node's first global IPv4 address, reported as the
// pods' hostIP.
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
