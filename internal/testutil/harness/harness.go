// Package harness runs the staticlet binary for the suites under test/
// (end to end, systemd, VM, benchmarks) and the binary-driven tests left
// in cmd/staticlet. It owns a test's world (Env: a private containerd
// with the test image, the directories, pod network and log daemon of
// its staticlets), starting staticlet from the built binary (Binary:
// STATICLET_BIN, or one built once from the module root) with a
// stand-in NOTIFY_SOCKET (Daemon), writing manifests, and the waits and
// reads of the status socket the suites share (WaitFor, Daemon.WaitPod).
// It also keeps the fixtures more than one suite uses: the sleeper and
// benchmark pods, kubeadm's etcd, the node-shutdown pods, image
// archives and the Debian package; and the reads the secret tests share:
// a process's environment, the files of a directory that are on disk.
//
// It does not own containerd (ctrdtest starts it) nor any suite's
// checks. The staticlets an Env starts are killed, and its directories,
// network and log daemon removed, when its test ends. An Env and its
// Daemons belong to one test and its goroutine; Daemon.In gives a
// subtest a view whose waits fail the subtest.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// TestNode is the --node-name of the tests' staticlets, the suffix of
// their pods' names; TestNS is staticlet's containerd namespace.
const (
	TestNode = "testnode"
	TestNS   = "staticlet"
)

// Binary returns the staticlet binary the end-to-end tests run: the one
// make built (STATICLET_BIN), or one built here once.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("STATICLET_BIN"); b != "" {
		return b
	}
	builtOnce.Do(func() { builtPath, builtErr = BuildStaticlet("0") })
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtPath
}

var (
	builtOnce sync.Once
	builtPath string
	builtErr  error
)

// BuildStaticlet builds staticlet into a new temporary directory with
// CGO_ENABLED=cgo and returns its path.
func BuildStaticlet(cgo string) (string, error) {
	dir, err := os.MkdirTemp("", "staticlet-bin")
	if err != nil {
		return "", err
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "staticlet")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/staticlet")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building staticlet with CGO_ENABLED=%s: %v\n%s", cgo, err, out)
	}
	return path, nil
}

// ModuleRoot returns the directory of staticlet's go.mod, the module of
// the test running (go test runs it in its package's directory), from
// which the harness builds the binaries and the package.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not in a module")
	}
	return filepath.Dir(mod), nil
}

// Env is one test's world: a private containerd with the test image, and
// the directories a staticlet uses.
type Env struct {
	T        *testing.T
	Ctrd     *ctrdtest.Env
	Client   *client.Client
	Dir      string // short: holds sockets
	Manifest string
	Root     string
	Logs     string
	Net      *TestNet // the pod network of this test's staticlets
	ExtraEnv []string // added to the environment of staticlets started
	Bin      string   // the staticlet binary to run; Binary(t) when empty
	// Earlier says Bin is a build of an earlier commit: it is not given
	// the flags that keep the host's disk out of the test, which it may
	// not know.
	Earlier bool
}

// NewEnv makes t's world; everything in it goes when t ends.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	// The log daemon the test's staticlets started outlives them. It is
	// stopped last, once containerd's cleanup deleted the tasks of the
	// pods a test leaves running: a log forwarder the shim asks to stop
	// waits up to 10 s for a daemon to hand the container's pipes to,
	// which, with none running, outlasts the deadline of that deletion.
	var logDaemon int
	var logDir string
	t.Cleanup(func() { StopLogDaemon(t, logDaemon, logDir) })
	ctrd := ctrdtest.Start(t)
	ctrd.ImportImage(t, TestNS, testimage.DefaultRef)
	dir, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logDir = logd.Dir(filepath.Join(dir, "root"))
		logDaemon = logd.DaemonPID(logDir)
		// A staticlet killed by the test leaves its pods' namespaces pinned.
		if err := ctrdtest.UnmountUnder(dir); err != nil {
			t.Errorf("unmounting under %s: %v", dir, err)
		}
		os.RemoveAll(dir)
	})
	e := &Env{
		T: t, Ctrd: ctrd, Client: ctrd.Client(t), Dir: dir,
		Manifest: filepath.Join(dir, "manifests"),
		Root:     filepath.Join(dir, "root"),
		Logs:     filepath.Join(dir, "logs"),
	}
	if err := os.MkdirAll(e.Manifest, 0o755); err != nil {
		t.Fatal(err)
	}
	e.Net = NewTestNet(t)
	return e
}

// StopLogDaemon ends process pid, the log daemon of directory dir, and
// waits until it is gone. A pid of 0 is none; so is a process that is no
// longer that daemon (it exited, idle, since it was found, and its PID
// went to another).
func StopLogDaemon(t testing.TB, pid int, dir string) {
	t.Helper()
	if pid == 0 || !slices.Contains(Cmdline(pid), dir) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	WaitFor(t, 30*time.Second, "the log daemon to exit", func() (bool, string) {
		return !ProcessRunning(pid), fmt.Sprintf("log daemon %d running", pid)
	})
}

// Write puts a manifest file into the manifest directory atomically.
func (e *Env) Write(name, content string) {
	e.T.Helper()
	tmp := filepath.Join(e.Manifest, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.T.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.Manifest, name)); err != nil {
		e.T.Fatal(err)
	}
}

// Remove deletes a manifest file from the manifest directory.
func (e *Env) Remove(name string) {
	e.T.Helper()
	if err := os.Remove(filepath.Join(e.Manifest, name)); err != nil {
		e.T.Fatal(err)
	}
}

// Daemon is one running staticlet process.
type Daemon struct {
	T      *testing.T
	Cmd    *exec.Cmd
	Socket string
	Notify *NotifyListener
	Out    *SyncBuffer
	done   chan struct{}
}

// In is d as seen from subtest t: its waits fail t, not the test that
// started d (a subtest may not end its parent).
func (d *Daemon) In(t *testing.T) *Daemon {
	c := *d
	c.T = t
	return &c
}

// Start runs staticlet against the env's containerd and directories.
func (e *Env) Start(extra ...string) *Daemon {
	e.T.Helper()
	d := e.NewDaemon()
	d.Notify = ListenNotify(e.T, filepath.Join(e.Dir, "notify.sock"))
	args := append([]string{"run",
		"--manifest-dir", e.Manifest,
		"--containerd-address", e.Ctrd.Address,
		"--root-dir", e.Root,
		"--pod-logs-dir", e.Logs,
		"--status-socket", d.Socket,
		"--node-name", TestNode,
		"--file-check-frequency", "5s",
		"--log-level", "debug",
	}, e.Net.Flags()...)
	if !e.Earlier {
		args = append(args, hostDiskFlags()...)
	}
	args = append(args, driverFlags()...)
	args = append(args, extra...)
	e.Launch(d, args, "NOTIFY_SOCKET="+d.Notify.Path, "WATCHDOG_USEC=2000000")
	return d
}

// hostDiskFlags keep the test host's disk out of the tests.
//
// The image filesystem is the host's disk, filled by whatever else the
// host holds: above the default 85% the image GC would remove images
// between a test's pods and warn. A test of the GC sets its own
// thresholds.
//
// The root dir and the logs are on the host's disk too: under the
// default 10% free every status would add DiskPressure. A full tmpfs (0%
// free) still crosses 1%; a test of the thresholds gives its own, which
// come later and win for the signals they name.
func hostDiskFlags() []string {
	return []string{
		"--image-gc-high-threshold", "100",
		"--image-gc-low-threshold", "99",
		"--eviction-hard", "nodefs.available<1%,nodefs.inodesFree<1%",
	}
}

// driverFlags choose the cgroup driver STATICLET_TEST_CGROUP_DRIVER names
// for the tests' staticlets (TestVM runs tests once with each); none
// chooses the default. A test's own --cgroup-driver comes later and wins.
func driverFlags() []string {
	if d := os.Getenv("STATICLET_TEST_CGROUP_DRIVER"); d != "" {
		return []string{"--cgroup-driver", d}
	}
	return nil
}

// NewDaemon is a daemon of this env, not started yet.
func (e *Env) NewDaemon() *Daemon {
	return &Daemon{T: e.T, Socket: filepath.Join(e.Dir, "status.sock"), Out: &SyncBuffer{}, done: make(chan struct{})}
}

// Launch starts d's staticlet with args and env (besides the test's own
// and the env's extra variables), stops it when the test ends, and waits
// until its status socket says it is ready.
func (e *Env) Launch(d *Daemon, args []string, env ...string) {
	e.T.Helper()
	bin := e.Bin
	if bin == "" {
		bin = Binary(e.T)
	}
	d.Cmd = exec.Command(bin, args...)
	d.Cmd.Env = append(append(os.Environ(), env...), e.ExtraEnv...)
	d.Cmd.Stdout, d.Cmd.Stderr = d.Out, d.Out
	if err := d.Cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	go func() { _ = d.Cmd.Wait(); close(d.done) }()
	e.T.Cleanup(func() {
		d.Kill()
		if e.T.Failed() {
			e.T.Logf("staticlet output:\n%s", d.Out.String())
		}
	})
	WaitFor(e.T, 30*time.Second, "staticlet ready", func() (bool, string) {
		err := d.Client().Ready(context.Background())
		return err == nil, fmt.Sprint(err)
	})
}

// Client is a client of d's status socket.
func (d *Daemon) Client() *status.Client { return status.NewClient(d.Socket) }

// Kill ends the process with SIGKILL, as a crash would.
func (d *Daemon) Kill() {
	if d.Cmd.Process != nil {
		_ = d.Cmd.Process.Signal(syscall.SIGKILL)
	}
	<-d.done
}

// Stop ends the process with SIGTERM, as systemd would.
func (d *Daemon) Stop() {
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.T.Errorf("staticlet did not exit within 20s of SIGTERM")
		d.Kill()
	}
}

// Running tells whether d's process has not exited yet.
func (d *Daemon) Running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// Pod fetches one pod from the status socket.
func (d *Daemon) Pod(name string) (*v1.Pod, error) {
	return d.Client().Pod(context.Background(), name)
}

// CLI runs a staticlet client command against this daemon.
func (d *Daemon) CLI(args ...string) (string, error) {
	args = append(args, "--status-socket", d.Socket)
	out, err := exec.Command(Binary(d.T), args...).CombinedOutput()
	return string(out), err
}

// WaitPod waits until pod name satisfies cond.
func (d *Daemon) WaitPod(name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	d.T.Helper()
	var last *v1.Pod
	WaitFor(d.T, timeout, what, func() (bool, string) {
		p, err := d.Pod(name)
		if err != nil {
			return false, err.Error()
		}
		last = p
		return cond(p), Describe(p)
	})
	return last
}

// Describe is a one-line summary of a pod's state for failure messages.
func Describe(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", p.Status.Phase)
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, " %s{restarts=%d ready=%v", cs.Name, cs.RestartCount, cs.Ready)
		switch s := cs.State; {
		case s.Running != nil:
			b.WriteString(" running")
		case s.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", s.Waiting.Reason, s.Waiting.Message)
		case s.Terminated != nil:
			fmt.Fprintf(&b, " terminated %d", s.Terminated.ExitCode)
		}
		b.WriteString("}")
	}
	return b.String()
}

// Running tells whether pod p runs: its phase Running and every one of
// its containers running.
func Running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NotifyListener stands in for systemd's NOTIFY_SOCKET.
type NotifyListener struct {
	Path string
	mu   sync.Mutex
	msgs []string
}

// ListenNotify listens on a unixgram socket at path, until t ends.
func ListenNotify(t testing.TB, path string) *NotifyListener {
	t.Helper()
	_ = os.Remove(path)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &NotifyListener{Path: path}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, strings.Split(strings.TrimSpace(string(buf[:k])), "\n")...)
			n.mu.Unlock()
		}
	}()
	return n
}

// Lines returns every line received so far.
func (n *NotifyListener) Lines() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.msgs...)
}

// Has tells whether a line with prefix arrived, and returns the last one.
func (n *NotifyListener) Has(prefix string) (string, bool) {
	lines := n.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i], true
		}
	}
	return "", false
}

// SyncBuffer is a bytes.Buffer safe for a process's output and the test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Containers lists the containers in staticlet's namespace.
func (e *Env) Containers(ctx context.Context) []client.Container {
	e.T.Helper()
	cs, err := e.Client.Containers(NSCtx(ctx))
	if err != nil {
		e.T.Fatal(err)
	}
	return cs
}

// ProcessRunning tells whether pid is alive and not a zombie.
func ProcessRunning(pid int) bool {
	p, err := procfs.Read(pid)
	return err == nil && p.State != 'Z'
}

// Cmdline returns the arguments of process pid.
func Cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// Environ returns the environment of process pid.
func Environ(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// IDs returns the IDs of cs.
func IDs(cs []client.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ID())
	}
	return out
}

// NSCtx is ctx in staticlet's containerd namespace, TestNS.
func NSCtx(ctx context.Context) context.Context { return namespaces.WithNamespace(ctx, TestNS) }

// PidOf returns the process of the container a status names.
func (e *Env) PidOf(cs v1.ContainerStatus) (int, error) {
	id := strings.TrimPrefix(cs.ContainerID, "containerd://")
	if id == "" {
		return 0, errors.New("no container ID in status")
	}
	ctx := NSCtx(context.Background())
	c, err := e.Client.LoadContainer(ctx, id)
	if err != nil {
		return 0, err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return 0, err
	}
	return int(task.Pid()), nil
}

// TrappedFile is the file, in a container's root, that a test's script
// creates once its traps are set; see waitTrapped.
const TrappedFile = "/tmp/trapped"

// WaitTrapped waits until the script of every container of pod p has set
// its traps, which it tells by creating trappedFile. Neither the pod
// running nor the process's signal masks tell it: until runc's init has
// executed the script's shell, the container's process is that init, a Go
// program that catches every signal; and a stop signal reaching the shell
// before its trap is discarded, the shell being its PID namespace's init,
// so the container runs on until SIGKILL.
func (e *Env) WaitTrapped(p *v1.Pod) {
	e.T.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		pid, err := e.PidOf(cs)
		if err != nil {
			e.T.Fatalf("the process of %s: %v", cs.Name, err)
		}
		path := fmt.Sprintf("/proc/%d/root%s", pid, TrappedFile)
		WaitFor(e.T, 10*time.Second, cs.Name+" trapping signals", func() (bool, string) {
			_, err := os.Stat(path)
			return err == nil, fmt.Sprint(err)
		})
	}
}

// ExitCodeOf returns the exit code of a command that failed with err: 0
// for no error, -1 if it did not exit.
func ExitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
