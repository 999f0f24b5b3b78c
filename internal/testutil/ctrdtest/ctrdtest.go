// Package ctrdtest starts a private containerd for integration tests, so that
// tests of staticlet's containerd adapters run against the real daemon and
// runc without touching the host's containerd.
//
// It owns one daemon per Env: its temp directory (root, state, sockets, log),
// the child process, and everything left behind when it stops: tasks and
// containers in every namespace, shim processes started for its socket,
// mounts under its directory. It does not choose namespaces; callers pass
// theirs (staticlet uses "staticlet") to ImportImage and their own calls.
//
// The daemon is the distribution's containerd unless the environment variable
// STATICLET_TEST_CONTAINERD (DaemonEnv) selects another: one of Releases,
// which Build builds from its Go module into a cache on first use, or a
// binary by path.
//
// It is meant to be imported only from _test.go files, and by tools such as
// benchmarks through StartDaemon. An Env is safe for concurrent use; several
// Envs may run in one process. Containers in different Envs that share a
// namespace and ID also share runc's state directory
// (/run/containerd/runc/<namespace>/<id>) and cgroup path, so tests that run
// in parallel should use unique container IDs.
//
// Shims daemonize, so when they exit their parent is whichever process reaps
// orphans. Some inits (in VMs and containers) never do, and each task would
// leave a zombie shim behind. So StartDaemon makes the calling process a child
// subreaper, and Stop reaps the exited shims it then inherits. This affects
// the whole process: other orphaned descendants also become its children.
package ctrdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// Timeouts for the daemon's lifecycle. Generous because CI machines are slow;
// none of them is waited out on the happy path.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 60 * time.Second
	callTimeout  = 10 * time.Second
	termTimeout  = 10 * time.Second
	// buildTimeout bounds building a release, which takes minutes on a
	// busy machine with nothing cached; make test builds them before the
	// tests run, so a test waits for one only when run by hand.
	buildTimeout = 20 * time.Minute
)

// maxSocketPath is the longest unix socket path the kernel accepts
// (sizeof(sockaddr_un.sun_path) minus the terminating NUL).
const maxSocketPath = 107

// Snapshotter names as containerd registers them.
const (
	SnapshotterOverlay = "overlayfs"
	SnapshotterNative  = "native"
)

// Env is a running private containerd. Its exported fields are set by
// Start or StartDaemon and must not be changed.
type Env struct {
	// Dir is the temp directory holding everything below.
	Dir string
	// Address is the containerd gRPC socket path, for client.New.
	Address string
	// Root and State are containerd's root and state directories.
	Root, State string
	// Snapshotter is the snapshotter images are unpacked for and containers
	// should use: overlayfs when it works on Dir's file system, else native.
	Snapshotter string
	// Version is the daemon's version, as its Version service reports it.
	Version string
	// Binary is the daemon's executable.
	Binary string
	// LogPath is the file holding the daemon's stdout and stderr.
	LogPath string

	daemon  Daemon
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error         // cmd.Wait's result, valid once exited is closed
	client  *client.Client
}

// Start starts a private containerd in a new temp directory and registers a
// cleanup that stops it and removes everything it left behind. It skips the
// test when not running as root or when containerd, its runc shim or runc is
// missing, unless the environment variable CI is "true", in which case it
// fails the test instead. A DaemonEnv that selects nothing known, or a
// release that fails to build, fails the test. On test failure the daemon's
// version and log are logged.
func Start(t testing.TB) *Env {
	t.Helper()
	tier.Integration(t, "a private containerd")
	if _, err := selected(); err != nil {
		t.Fatalf("ctrdtest: %v", err)
	}
	if err := Preflight(); err != nil {
		tier.Missing(t, fmt.Sprintf("ctrdtest: %v", err))
	}
	buildCtx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	d, err := SelectedDaemon(buildCtx)
	cancel()
	if err != nil {
		t.Fatalf("ctrdtest: %v", err)
	}
	dir, err := tempDir()
	if err != nil {
		t.Fatalf("ctrdtest: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	e, err := startDaemon(ctx, dir, d)
	if e != nil {
		t.Cleanup(func() {
			if t.Failed() {
				e.logDaemonLog(t)
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			if err := e.Stop(stopCtx); err != nil {
				t.Errorf("ctrdtest: %v", err)
			}
		})
	} else if rmErr := os.RemoveAll(dir); rmErr != nil {
		t.Logf("ctrdtest: removing %s: %v", dir, rmErr)
	}
	if err != nil {
		t.Fatalf("ctrdtest: containerd %s: %v", d.Containerd, err)
	}
	t.Logf("ctrdtest: containerd %s (%s) at %s (snapshotter %s)", e.Version, e.Binary, e.Address, e.Snapshotter)
	return e
}

// Preflight reports why a private containerd cannot be started here: not
// root, DaemonEnv naming nothing known, or the selected containerd, its
// containerd-shim-runc-v2, or runc not found. For a release not built yet
// it needs the go command instead of the binaries.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("containerd tests need root")
	}
	sel, err := selected()
	if err != nil {
		return err
	}
	var need []string
	switch {
	case sel.release != nil:
		if !complete(filepath.Join(CacheDir, sel.release.Version)) {
			need = append(need, "go")
		}
	case sel.path != "":
		if _, err := os.Stat(sel.path); err != nil {
			return fmt.Errorf("containerd selected by %s: %w", DaemonEnv, err)
		}
		if !complete(filepath.Dir(sel.path)) {
			need = append(need, shimName)
		}
	default:
		if _, err := containerdBinary(); err != nil {
			return err
		}
		need = append(need, shimName)
	}
	for _, bin := range append(need, "runc") {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("looking up %s: %w", bin, err)
		}
	}
	return nil
}

// DaemonEnv is the environment variable that selects the containerd the
// tests run against: empty or "system" for the distribution's
// (containerdBinary); a series or version of Releases ("1.7", "2.4",
// "v2.4.2"), or its major version alone ("2"); or the path of a containerd
// binary, whose runc shim is looked for beside it before PATH.
const DaemonEnv = "STATICLET_TEST_CONTAINERD"

// Daemon is a containerd executable and how to run it.
type Daemon struct {
	// Containerd is the daemon's executable.
	Containerd string
	// ShimDir, when set, goes first in the daemon's PATH, where it looks
	// for containerd-shim-runc-v2, so it starts the shim of its own
	// release rather than the distribution's.
	ShimDir string
	// Major is the daemon's major version, which decides its config.
	Major int
}

// selection is what DaemonEnv names: a release, a path, or neither (the
// distribution's containerd).
type selection struct {
	release *Release
	path    string
}

// selected parses DaemonEnv.
func selected() (selection, error) {
	v := os.Getenv(DaemonEnv)
	switch {
	case v == "" || v == "system":
		return selection{}, nil
	case strings.Contains(v, "/"):
		p, err := filepath.Abs(v)
		if err != nil {
			return selection{}, fmt.Errorf("resolving %s=%s: %w", DaemonEnv, v, err)
		}
		return selection{path: p}, nil
	}
	for i, r := range Releases {
		if v == r.Series || v == r.Version || "v"+v == r.Version || strings.HasPrefix(r.Version, "v"+v+".") {
			return selection{release: &Releases[i]}, nil
		}
	}
	var known []string
	for _, r := range Releases {
		known = append(known, r.Series)
	}
	return selection{}, fmt.Errorf("%s=%s selects no containerd: want system, %s, or a path to a containerd binary",
		DaemonEnv, v, strings.Join(known, ", "))
}

// SelectedDaemon returns the containerd DaemonEnv selects, building a
// release first if it is not in CacheDir yet (ctx bounds the build).
func SelectedDaemon(ctx context.Context) (Daemon, error) {
	sel, err := selected()
	if err != nil {
		return Daemon{}, err
	}
	switch {
	case sel.release != nil:
		dir, err := Build(ctx, *sel.release)
		if err != nil {
			return Daemon{}, err
		}
		return Daemon{Containerd: filepath.Join(dir, containerdName), ShimDir: dir, Major: sel.release.Major()}, nil
	case sel.path != "":
		d := Daemon{Containerd: sel.path}
		if complete(filepath.Dir(sel.path)) {
			d.ShimDir = filepath.Dir(sel.path)
		}
		d.Major, err = majorVersion(ctx, sel.path)
		return d, err
	default:
		bin, err := containerdBinary()
		if err != nil {
			return Daemon{}, err
		}
		major, err := majorVersion(ctx, bin)
		return Daemon{Containerd: bin, Major: major}, err
	}
}

// majorVersion runs bin --version, which prints
// "containerd <package> <version> <revision>" (Debian's version looks like
// 1.6.20~ds1, a release's like v2.4.2), and returns the major version.
func majorVersion(ctx context.Context, bin string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("running %s --version: %w", bin, err)
	}
	major, err := parseMajor(string(out))
	if err != nil {
		return 0, fmt.Errorf("version of %s: %w", bin, err)
	}
	return major, nil
}

// parseMajor returns the major version in containerd's --version output.
func parseMajor(out string) (int, error) {
	f := strings.Fields(out)
	if len(f) < 3 {
		return 0, fmt.Errorf("unexpected --version output %q", out)
	}
	v := strings.TrimPrefix(f[2], "v")
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("unexpected version %q in --version output %q", f[2], out)
	}
	return n, nil
}

// containerdBinary prefers the distribution's containerd, then PATH.
func containerdBinary() (string, error) {
	const system = "/usr/bin/containerd"
	if _, err := os.Stat(system); err == nil {
		return system, nil
	}
	p, err := exec.LookPath("containerd")
	if err != nil {
		return "", fmt.Errorf("looking up containerd: %w", err)
	}
	return p, nil
}

// tempDir makes a directory short enough for the sockets inside it: TMPDIR
// may be long (for example under a CI workspace), and a socket path over
// maxSocketPath bytes fails to bind.
func tempDir() (string, error) {
	dir, err := os.MkdirTemp("", "ctrd")
	if err != nil {
		return "", fmt.Errorf("creating temp dir: %w", err)
	}
	if len(socketPaths(dir)[1]) <= maxSocketPath {
		return dir, nil
	}
	os.Remove(dir)
	dir, err = os.MkdirTemp("/tmp", "ctrd")
	if err != nil {
		return "", fmt.Errorf("creating temp dir: %w", err)
	}
	return dir, nil
}

// socketPaths returns the gRPC and ttrpc socket paths inside dir.
func socketPaths(dir string) [2]string {
	grpc := filepath.Join(dir, "c.sock")
	return [2]string{grpc, grpc + ".ttrpc"}
}

// StartDaemon starts the containerd DaemonEnv selects (SelectedDaemon) with
// its root, state, sockets and log in dir, an existing, empty directory
// short enough for socket paths, and waits until it answers or ctx is done.
// Whenever it returns a non-nil Env, even with an error, the caller must
// call Stop, which also removes dir.
func StartDaemon(ctx context.Context, dir string) (*Env, error) {
	d, err := SelectedDaemon(ctx)
	if err != nil {
		return nil, err
	}
	return startDaemon(ctx, dir, d)
}

// startDaemon is StartDaemon for daemon d.
func startDaemon(ctx context.Context, dir string, d Daemon) (*Env, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	socks := socketPaths(dir)
	if len(socks[1]) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is longer than %d bytes", socks[1], maxSocketPath)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("becoming child subreaper: %w", err)
	}
	e := &Env{
		Dir:     dir,
		Address: socks[0],
		Root:    filepath.Join(dir, "root"),
		State:   filepath.Join(dir, "state"),
		LogPath: filepath.Join(dir, "containerd.log"),
		Binary:  d.Containerd,
		daemon:  d,
	}
	if err := os.WriteFile(e.configPath(), []byte(config(dir, socks, d.Major)), 0o600); err != nil {
		return nil, fmt.Errorf("writing containerd config: %w", err)
	}
	if err := e.launch(); err != nil {
		return nil, err
	}
	if err := e.waitReady(ctx); err != nil {
		return e, err
	}
	if err := e.chooseSnapshotter(ctx); err != nil {
		return e, err
	}
	return e, nil
}

func (e *Env) configPath() string { return filepath.Join(e.Dir, "config.toml") }

// launch starts the daemon process, its output appended to LogPath, and a
// goroutine that waits for it and then closes e.exited.
func (e *Env) launch() error {
	logFile, err := os.OpenFile(e.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("creating containerd log: %w", err)
	}
	defer logFile.Close() // the child has its own copy once started

	cmd := exec.Command(e.daemon.Containerd, "--config", e.configPath(), "--log-level", "debug")
	cmd.Env = os.Environ()
	if e.daemon.ShimDir != "" {
		cmd.Env = append(cmd.Env, "PATH="+e.daemon.ShimDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = e.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so a terminal's ^C reaches only the test, which
		// then stops the daemon in its cleanup. Pdeathsig covers a test
		// binary that dies without cleaning up (it fires when the thread that
		// started the daemon exits, which Go threads do only with the process).
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", e.daemon.Containerd, err)
	}
	exited := make(chan struct{})
	e.cmd, e.exited = cmd, exited
	go func() {
		e.waitErr = cmd.Wait()
		close(exited)
	}()
	return nil
}

// Restart stops the daemon with SIGTERM, as a service manager does, and
// starts it again on the same directories, sockets and config, returning
// once it answers. Running tasks and their shims outlive the restart, as
// they outlive a real containerd's. It must not run concurrently with Stop
// or another Restart.
func (e *Env) Restart(ctx context.Context) error {
	if err := e.stopDaemon(ctx); err != nil {
		return fmt.Errorf("restarting containerd at %s: %w", e.Address, err)
	}
	if err := e.launch(); err != nil {
		return fmt.Errorf("restarting containerd at %s: %w", e.Address, err)
	}
	if err := e.waitReady(ctx); err != nil {
		return fmt.Errorf("restarting containerd at %s: %w", e.Address, err)
	}
	return nil
}

// Crash kills the daemon with SIGKILL, as the OOM killer or a power cut
// would, and starts it again on the same directories, returning once it
// answers. What was in flight when it died is left as it was; tasks and
// their shims outlive it. Like Restart, it must not run concurrently with
// Stop or another restart.
func (e *Env) Crash(ctx context.Context) error {
	if !e.exitedEarly() {
		if err := e.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("killing containerd at %s: %w", e.Address, err)
		}
		<-e.exited
	}
	if err := e.launch(); err != nil {
		return fmt.Errorf("starting containerd at %s again: %w", e.Address, err)
	}
	if err := e.waitReady(ctx); err != nil {
		return fmt.Errorf("starting containerd at %s again: %w", e.Address, err)
	}
	return nil
}

// config returns the config for a containerd of major version major living
// in dir: config version 2 for 1.6 and 1.7, version 3 for 2.x, whose plugin
// IDs differ. Plugins that need hardware, kernel features or configuration
// that a test machine lacks are disabled, CRI among them: staticlet does not
// use it. So is NRI, which 2.x enables by default, and which would listen on
// one socket (/var/run/nri/nri.sock) for every daemon on the host.
// Disabling a plugin a daemon does not have is harmless, so the lists name
// what any version may have: the releases Build builds lack most of them.
// 1.x's v1 runtime (io.containerd.runtime.v1.linux) stays enabled although
// nothing uses it: 1.6's tasks service fails to load without it; 2.x has
// none.
// There is no daemon-wide default runtime outside CRI: the client picks
// io.containerd.runc.v2 and, without runtime options, runc uses cgroupfs
// (SystemdCgroup false), which is what we want without systemd.
func config(dir string, socks [2]string, major int) string {
	q := strconv.Quote // TOML basic strings escape like Go for plain paths
	disabled := []string{
		"io.containerd.grpc.v1.cri",
		"io.containerd.snapshotter.v1.btrfs",
		"io.containerd.snapshotter.v1.devmapper",
		"io.containerd.snapshotter.v1.zfs",
		"io.containerd.tracing.processor.v1.otlp",
		"io.containerd.internal.v1.tracing",
		"io.containerd.nri.v1.nri",
	}
	version := 2
	if major >= 2 {
		version = 3
		// CRI is split into several plugins in 2.x.
		disabled = append(disabled,
			"io.containerd.cri.v1.images",
			"io.containerd.cri.v1.runtime",
			"io.containerd.podsandbox.controller.v1.podsandbox",
		)
	} else {
		disabled = append(disabled, "io.containerd.snapshotter.v1.aufs")
	}
	for i, p := range disabled {
		disabled[i] = q(p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version = %d\n", version)
	fmt.Fprintf(&b, "root = %s\n", q(filepath.Join(dir, "root")))
	fmt.Fprintf(&b, "state = %s\n", q(filepath.Join(dir, "state")))
	fmt.Fprintf(&b, "disabled_plugins = [%s]\n\n", strings.Join(disabled, ", "))
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n\n", q(socks[0]))
	fmt.Fprintf(&b, "[ttrpc]\n  address = %s\n\n", q(socks[1]))
	fmt.Fprintf(&b, "[debug]\n  address = \"\"\n\n")
	fmt.Fprintf(&b, "[metrics]\n  address = \"\"\n\n")
	// The opt plugin would otherwise create /opt/containerd on the host.
	fmt.Fprintf(&b, "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %s\n", q(filepath.Join(dir, "opt")))
	return b.String()
}

// waitReady polls the daemon's Version service until it answers, the daemon
// exits or ctx is done.
func (e *Env) waitReady(ctx context.Context) error {
	if e.client == nil { // a restarted daemon's client reconnects by itself
		c, err := client.New(e.Address, client.WithTimeout(callTimeout))
		if err != nil {
			return fmt.Errorf("creating containerd client for %s: %w", e.Address, err)
		}
		e.client = c
	}
	c := e.client
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if _, err := os.Stat(e.Address); err == nil {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			v, err := c.Version(callCtx)
			cancel()
			if err == nil {
				e.Version = v.Version
				return nil
			}
			lastErr = err
		}
		select {
		case <-e.exited:
			return fmt.Errorf("containerd exited before it was ready (%v); log in %s", e.waitErr, e.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("waiting for containerd at %s: %w (last error: %v)", e.Address, ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// chooseSnapshotter picks overlayfs when its plugin loaded (containerd tests
// an overlay mount on its root when loading it) and native otherwise.
func (e *Env) chooseSnapshotter(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := e.client.IntrospectionService().Plugins(ctx,
		"type==io.containerd.snapshotter.v1,id=="+SnapshotterOverlay)
	if err != nil {
		return fmt.Errorf("listing containerd snapshotter plugins: %w", err)
	}
	e.Snapshotter = SnapshotterNative
	if ps := resp.GetPlugins(); len(ps) == 1 && ps[0].GetInitErr() == nil {
		e.Snapshotter = SnapshotterOverlay
	}
	return nil
}

// Client returns a new client of the daemon, closed when t's test ends. It has
// no default namespace: use namespaces.WithNamespace on contexts.
func (e *Env) Client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(e.Address, client.WithTimeout(callTimeout))
	if err != nil {
		t.Fatalf("ctrdtest: creating containerd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// logDaemonLog logs the daemon's log, up to its last 64 KiB.
func (e *Env) logDaemonLog(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(e.LogPath)
	if err != nil {
		t.Logf("ctrdtest: reading containerd log: %v", err)
		return
	}
	const max = 64 << 10
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	t.Logf("ctrdtest: log of containerd %s (%s), %s:\n%s", e.Version, e.Binary, e.LogPath, b)
}
