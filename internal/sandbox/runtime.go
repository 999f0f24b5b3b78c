// Package sandbox is staticlet's link to containerd's containers and
// tasks. It creates a pod's pause sandbox and containers, stops and
// removes them, lists them by label so a restarted staticlet can adopt
// them, and turns containerd's task-exit events into data for the
// reconciler. It decides nothing: what to run and when is the
// reconciler's business. The trades around a container are packages of
// their own that it drives through interfaces it declares: the pods'
// cgroups (cgroups), the pod network (podnet), images (images) and the
// pause program (pause).
//
// Every method takes a context and is safe for concurrent use; calls for
// different pods never wait on each other, but in containerd: pods that
// share a runc shim (shims.go) have their tasks created and started by
// it one at a time.
package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/lease"
	"github.com/staticlet/staticlet/internal/pause"
	"github.com/staticlet/staticlet/internal/podnet"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// Labels staticlet puts on every containerd container it creates. They carry
// everything a restarted staticlet needs to rebuild its state.
const (
	labelPrefix       = "io.staticlet."
	LabelPodName      = labelPrefix + "pod.name"
	LabelPodNamespace = labelPrefix + "pod.namespace"
	LabelPodUID       = labelPrefix + "pod.uid"
	LabelKind         = labelPrefix + "kind"
	LabelContainer    = labelPrefix + "container.name"
	LabelHash         = labelPrefix + "hash"
	LabelAttempt      = labelPrefix + "attempt"
	LabelSandboxID    = labelPrefix + "sandbox.id"
	LabelImageRef     = labelPrefix + "image.ref"
	LabelImageID      = labelPrefix + "image.id"
	LabelExitCode     = labelPrefix + "exit.code"
	LabelFinishedAt   = labelPrefix + "exit.time"
	// LabelOOMKilled is "true" on a container the kernel's OOM killer
	// killed a process of: its exit's reason is OOMKilled.
	LabelOOMKilled = labelPrefix + "exit.oom"
	// LabelPodIPs is on a sandbox: its pod's addresses, comma-separated.
	LabelPodIPs = labelPrefix + "pod.ips"
	// LabelStarting is put on a container that runs at most once (its
	// pod's restartPolicy is Never) just before its task starts, with the
	// time: one that has it, no task and no recorded exit may have run,
	// and is not started again.
	LabelStarting = labelPrefix + "starting"
	// LabelShimGroup is on a sandbox of a shared shim: the group, which
	// its pod's containers join, counted to cap a group's pods.
	LabelShimGroup = labelPrefix + "shim.group"
	// LabelPinned is "true" on a sandbox whose namespaces are pinned
	// under the root dir, apart from its pause process (pod.Record.Pinned).
	LabelPinned = labelPrefix + "sandbox.pinned"
	// LabelPause is "none" on a sandbox that has no pause process
	// (pod.Record.NoPause): nothing of its pod needs one.
	LabelPause = labelPrefix + "sandbox.pause"
	// LabelBoot is on a sandbox without a pause process: the boot of the
	// node it was made in (the kernel's boot_id). Its pinned namespaces
	// and its cgroup did not outlive that boot.
	LabelBoot = labelPrefix + "sandbox.boot"
	// LabelStopNeeds is what orders the stop of the container's pod among
	// others (pod.StopNeeds, encoded), as its spec said when the
	// container was made; absent when it needs nothing and serves no
	// port.
	LabelStopNeeds = labelPrefix + "stop.needs"
	// LabelPins is on a sandbox without a pause process: the namespaces
	// pinned for it (netns kinds, comma-separated; empty for none).
	LabelPins = labelPrefix + "sandbox.pins"
)

// runcRuntime is the containerd runtime shim staticlet uses.
const runcRuntime = "io.containerd.runc.v2"

// Config configures a Runtime.
type Config struct {
	// Address is containerd's socket.
	Address string
	// Namespace is the containerd namespace that holds staticlet's objects.
	Namespace string
	// RootDir holds staticlet's state on disk: per-pod state
	// (pods/<uid>/), each sandbox's pinned namespaces (sandboxes/<id>/),
	// the pause root (pause/rootfs/), pod IP allocations (network/) and
	// seccomp profiles (seccomp/).
	RootDir string
	// Logs says where containers' output goes, and through what.
	Logs LogConfig
	// Pause configures the pause program of pods' sandboxes.
	Pause pause.Config
	// Cgroups configures the pods' cgroups: their driver, whether pods
	// have cgroups of their own, and the pods' process cap.
	Cgroups cgroups.Config
	// Snapshotter unpacks images; default overlayfs.
	Snapshotter string
	// Node is what pods' specs get from the node.
	Node NodeConfig
	// Network, when set, connects each pod off the host network to a host
	// bridge with addresses of its own; nil leaves such pods with loopback
	// only.
	Network *podnet.Config
	// Images configures where images come from: registry credentials and
	// mirrors, other containerd namespaces, the import directory.
	Images images.StoreConfig
	// ShimSpread is how many shared shims of a QoS class new pods spread
	// over before any is full (shims.go); default twice the number of
	// CPUs, at most 4.
	ShimSpread int
	// CallTimeout bounds each containerd call; default 30s.
	CallTimeout time.Duration
	// ClientOptions are added to the containerd client's: the tests count
	// the calls each operation makes through them.
	ClientOptions []client.Opt
	// Logger receives what is worth knowing and not an error of a call.
	Logger *slog.Logger
	// Devices are the CDI devices the node's specs name, which containers
	// ask for by their resource limits and their pod's annotations; nil
	// gives none. Its owner runs its watch (devices.Registry.Run).
	Devices *devices.Registry
}

// LogConfig says where containers' output goes.
type LogConfig struct {
	// Dir is where container output goes.
	Dir string
	// DriverArgs, when set, makes the runc shim write each container's
	// output through Driver (containerd's binary logging): the shim
	// runs Driver with DriverArgs(the container's log file) as its
	// arguments and the container's stdout and stderr pipes. Nil sends the
	// output raw to the log file (cio.LogFile).
	DriverArgs func(logPath string) map[string]string
	// Driver is the absolute path of the log driver program, needed
	// with DriverArgs (package logd installs it under RootDir). The
	// shim runs it in containerd's mount namespace, where a path of
	// staticlet's own (os.Executable in a container) may not exist.
	Driver string
	// Ensure, when set, is called before the shim starts Driver for a
	// container: it starts what Driver hands the output to (the log
	// daemon, which exits when no container has logged through it for a
	// while). A failure is logged; the container starts anyway, its
	// output waiting in the pipes.
	Ensure func() error
}

// NodeConfig is what pods' specs get from the node.
type NodeConfig struct {
	// HostIPs are the node's addresses, the primary first, for the
	// environment of containers.
	HostIPs []string
	// AllowedUnsafeSysctls are sysctls outside the safe set that pods may
	// set; a pattern ending in * matches a prefix.
	AllowedUnsafeSysctls []string
	// ResolvConf is the host's resolver configuration, the base of pods'
	// /etc/resolv.conf; default /etc/resolv.conf.
	ResolvConf string
}

// Runtime drives containerd for staticlet.
type Runtime struct {
	cfg    Config
	client *client.Client
	// images finds, pulls and unpacks the images containers run.
	images *images.Store
	// leases makes the leases containers' snapshots are made under.
	leases *lease.Maker
	// host is what staticlet found of the node when it started.
	host hostFacts
	// node is what containers' environments may refer to.
	node spec.NodeFacts
	// cgroups are the pods' cgroups, with what the node's cgroups and
	// staticlet's privileges let a spec ask for.
	cgroups podCgroups
	// messages caches exited containers' termination messages.
	messages idCache[string]
	// sandboxGroups caches the shim group of each sandbox, which each of its
	// pod's containers joins.
	sandboxGroups idCache[string]
	// listings shares the container listings of pods listed at once.
	listings listBatcher
	// groups counts the sandboxes being made per shim group.
	groups shimGroups
	// network is the pod network; a nil *podnet.Network without one.
	network podNetwork
	// shims remembers the shims SweepShims found serving no task.
	shims shimSweeper
	// pause is the pause root, and how to run the program in it.
	pause *pause.Root
	// devices hands out the CDI devices containers ask for.
	devices deviceAllocator
}

// hostFacts is what staticlet finds of the node when it starts.
type hostFacts struct {
	// caps are the capabilities staticlet holds, the most a container can
	// be given.
	caps []string
	// boot is the kernel's ID of the node's current boot.
	boot string
}

// New connects to containerd and prepares the pause root. It starts nothing.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "staticlet"
	}
	if cfg.Snapshotter == "" {
		cfg.Snapshotter = "overlayfs"
	}
	if cfg.Node.ResolvConf == "" {
		cfg.Node.ResolvConf = "/etc/resolv.conf"
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.ShimSpread <= 0 {
		cfg.ShimSpread = min(2*goruntime.NumCPU(), 4)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for _, ns := range cfg.Images.Namespaces {
		if err := identifiers.Validate(ns); err != nil {
			return nil, fmt.Errorf("image namespace: %w", err)
		}
	}
	if cfg.Logs.DriverArgs != nil && !filepath.IsAbs(cfg.Logs.Driver) {
		return nil, fmt.Errorf("log driver %q: the shim needs an absolute path", cfg.Logs.Driver)
	}
	pauseRoot, err := pause.Prepare(cfg.Pause, cfg.RootDir)
	if err != nil {
		return nil, err
	}
	boot, err := bootID()
	if err != nil {
		return nil, err
	}
	copts := append([]client.Opt{client.WithDefaultNamespace(cfg.Namespace), client.WithTimeout(10 * time.Second)}, cfg.ClientOptions...)
	c, err := client.New(cfg.Address, copts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to containerd at %s: %w", cfg.Address, err)
	}
	caps, err := boundingSet()
	if err != nil {
		return nil, err
	}
	node, err := nodeFacts(cfg.Node.HostIPs)
	if err != nil {
		return nil, err
	}
	cg, err := cgroups.New(cfg.Cgroups, cfg.Namespace, caps)
	if err != nil {
		c.Close()
		return nil, err
	}
	network, err := podnet.New(cfg.RootDir, cfg.Network, cfg.Logger)
	if err != nil {
		c.Close()
		return nil, err
	}
	leases := &lease.Maker{Leases: c.LeasesService(), Namespace: cfg.Namespace, CallTimeout: cfg.CallTimeout, Logger: cfg.Logger}
	store := images.NewStore(cfg.Images, images.Site{
		Client:      c,
		Namespace:   cfg.Namespace,
		Snapshotter: cfg.Snapshotter,
		CallTimeout: cfg.CallTimeout,
		RootDir:     cfg.RootDir,
		Leases:      leases,
		Logger:      cfg.Logger,
	})
	rt := &Runtime{cfg: cfg, client: c, images: store, leases: leases, host: hostFacts{caps: caps, boot: boot},
		node: node, cgroups: cg, network: network, pause: pauseRoot, devices: newDeviceAllocator(cfg.Devices)}
	return rt, nil
}

// nodeFacts reads the node's capacity: what a resource limit that is not
// set comes to in a container's environment.
func nodeFacts(hostIPs []string) (spec.NodeFacts, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return spec.NodeFacts{}, fmt.Errorf("reading the node's memory: %w", err)
	}
	return spec.NodeFacts{
		HostIPs: hostIPs,
		CPU:     *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		Memory:  *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI),
	}, nil
}

// boundingSet names the capabilities in staticlet's own bounding set.
func boundingSet() ([]string, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("reading own capabilities: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return nil, fmt.Errorf("reading own capabilities: %w", err)
			}
			return spec.CapsFromMask(mask), nil
		}
	}
	return nil, errors.New("reading own capabilities: no CapBnd line in /proc/self/status")
}

// Close releases the connection to containerd.
func (r *Runtime) Close() error {
	r.cgroups.Close()
	return r.client.Close()
}

// Ping checks that containerd answers.
func (r *Runtime) Ping(ctx context.Context) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if _, err := r.client.Version(ctx); err != nil {
		return fmt.Errorf("asking containerd for its version: %w", err)
	}
	return nil
}

// Version returns containerd's version as the CRI reports it, without
// the leading "v" ("2.1.4"): the node's containerRuntimeVersion.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, err := r.client.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("asking containerd for its version: %w", err)
	}
	return strings.TrimPrefix(v.Version, "v"), nil
}

// call scopes ctx to staticlet's namespace with the per-call deadline.
func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(namespaces.WithNamespace(ctx, r.cfg.Namespace), r.cfg.CallTimeout)
}

// nsContext scopes ctx to staticlet's namespace, with no deadline of its
// own, for calls that last as long as what they wait on.
func (r *Runtime) nsContext(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

// PodDir is the directory that holds a pod's state on the host.
func (r *Runtime) PodDir(uid string) string {
	return filepath.Join(r.cfg.RootDir, "pods", uid)
}

// PodLogDir is the directory that holds a pod's container logs.
func (r *Runtime) PodLogDir(namespace, name, uid string) string {
	return filepath.Join(r.cfg.Logs.Dir, namespace+"_"+name+"_"+uid)
}

// RemovePodFiles removes a pod's logs, cgroups and state directory once
// the pod is gone. The state directory goes last, and only once the rest
// is gone: it is the record SweepPodFiles finds a pod's leftovers by. What
// is mounted in it (Memory emptyDirs) is unmounted first; if that fails
// the directory is kept, as removing files from a live mount would empty
// it without freeing it.
func (r *Runtime) RemovePodFiles(ctx context.Context, namespace, name, uid string) error {
	if err := errors.Join(
		os.RemoveAll(r.PodLogDir(namespace, name, uid)),
		r.removePodCgroups(ctx, uid),
	); err != nil {
		return err
	}
	if err := unmountPodVolumes(r.PodDir(uid)); err != nil {
		return err
	}
	return os.RemoveAll(r.PodDir(uid))
}

// newID returns a fresh containerd object ID.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux.
	return hex.EncodeToString(b)
}

// phaseClock times the steps of one operation, for a debug line that says
// where its time went.
type phaseClock struct {
	last  time.Time
	steps []any
}

func newPhaseClock() *phaseClock { return &phaseClock{last: time.Now()} }

// mark ends step name: the time since the last mark.
func (c *phaseClock) mark(name string) {
	now := time.Now()
	c.steps = append(c.steps, name, now.Sub(c.last).Round(10*time.Microsecond))
	c.last = now
}

// attrs are the log attributes: first, then each step's time.
func (c *phaseClock) attrs(first ...any) []any { return append(first, c.steps...) }
