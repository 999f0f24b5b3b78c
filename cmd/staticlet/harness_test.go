package main

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

const (
	testNode = "testnode"
	testNS   = "staticlet"
)

// binary returns the staticlet binary the end-to-end tests run: the one
// make built (STATICLET_BIN), or one built here once.
func binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("STATICLET_BIN"); b != "" {
		return b
	}
	builtOnce.Do(func() { builtPath, builtErr = buildStaticlet("0") })
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

// buildStaticlet builds staticlet into a new temporary directory with
// CGO_ENABLED=cgo and returns its path.
func buildStaticlet(cgo string) (string, error) {
	dir, err := os.MkdirTemp("", "staticlet-bin")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "staticlet")
	cmd := exec.Command("go", "build", "-o", path, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building staticlet with CGO_ENABLED=%s: %v\n%s", cgo, err, out)
	}
	return path, nil
}

// env is one test's world: a private containerd with the test image, and
// the directories a staticlet uses.
type env struct {
	t        *testing.T
	ctrd     *ctrdtest.Env
	client   *client.Client
	dir      string // short: holds sockets
	manifest string
	root     string
	logs     string
	net      *testNet // the pod network of this test's staticlets
	extraEnv []string // added to the environment of staticlets started
	bin      string   // the staticlet binary to run; binary(t) when empty
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// The log daemon the test's staticlets started outlives them. It is
	// stopped last, once containerd's cleanup deleted the tasks of the
	// pods a test leaves running: a log forwarder the shim asks to stop
	// waits up to 10 s for a daemon to hand the container's pipes to,
	// which, with none running, outlasts the deadline of that deletion.
	var logDaemon int
	var logDir string
	t.Cleanup(func() { stopLogDaemon(t, logDaemon, logDir) })
	ctrd := ctrdtest.Start(t)
	ctrd.ImportImage(t, testNS, testimage.DefaultRef)
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
	e := &env{
		t: t, ctrd: ctrd, client: ctrd.Client(t), dir: dir,
		manifest: filepath.Join(dir, "manifests"),
		root:     filepath.Join(dir, "root"),
		logs:     filepath.Join(dir, "logs"),
	}
	if err := os.MkdirAll(e.manifest, 0o755); err != nil {
		t.Fatal(err)
	}
	e.net = newTestNet(t)
	return e
}

// stopLogDaemon ends process pid, the log daemon of directory dir, and
// waits until it is gone. A pid of 0 is none; so is a process that is no
// longer that daemon (it exited, idle, since it was found, and its PID
// went to another).
func stopLogDaemon(t testing.TB, pid int, dir string) {
	t.Helper()
	if pid == 0 || !slices.Contains(cmdline(pid), dir) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	waitFor(t, 30*time.Second, "the log daemon to exit", func() (bool, string) {
		return !processRunning(pid), fmt.Sprintf("log daemon %d running", pid)
	})
}

// write puts a manifest file into the manifest directory atomically.
func (e *env) write(name, content string) {
	e.t.Helper()
	tmp := filepath.Join(e.manifest, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.manifest, name)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.manifest, name)); err != nil {
		e.t.Fatal(err)
	}
}

// daemon is one running staticlet process.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	socket string
	notify *notifyListener
	out    *syncBuffer
	done   chan struct{}
}

// in is d as seen from subtest t: its waits fail t, not the test that
// started d (a subtest may not end its parent).
func (d *daemon) in(t *testing.T) *daemon {
	c := *d
	c.t = t
	return &c
}

// start runs staticlet against the env's containerd and directories.
func (e *env) start(extra ...string) *daemon {
	e.t.Helper()
	d := e.newDaemon()
	d.notify = listenNotify(e.t, filepath.Join(e.dir, "notify.sock"))
	args := append([]string{"run",
		"--manifest-dir", e.manifest,
		"--containerd-address", e.ctrd.Address,
		"--root-dir", e.root,
		"--pod-logs-dir", e.logs,
		"--status-socket", d.socket,
		"--node-name", testNode,
		"--file-check-frequency", "5s",
		"--log-level", "debug",
	}, e.net.flags()...)
	args = append(args, driverFlags()...)
	args = append(args, extra...)
	e.launch(d, args, "NOTIFY_SOCKET="+d.notify.path, "WATCHDOG_USEC=2000000")
	return d
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

// newDaemon is a daemon of this env, not started yet.
func (e *env) newDaemon() *daemon {
	return &daemon{t: e.t, socket: filepath.Join(e.dir, "status.sock"), out: &syncBuffer{}, done: make(chan struct{})}
}

// launch starts d's staticlet with args and env (besides the test's own
// and the env's extra variables), stops it when the test ends, and waits
// until its status socket says it is ready.
func (e *env) launch(d *daemon, args []string, env ...string) {
	e.t.Helper()
	bin := e.bin
	if bin == "" {
		bin = binary(e.t)
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(append(os.Environ(), env...), e.extraEnv...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() {
		d.kill()
		if e.t.Failed() {
			e.t.Logf("staticlet output:\n%s", d.out.String())
		}
	})
	waitFor(e.t, 30*time.Second, "staticlet ready", func() (bool, string) {
		err := d.client().Ready(context.Background())
		return err == nil, fmt.Sprint(err)
	})
}

func (d *daemon) client() *status.Client { return status.NewClient(d.socket) }

// kill ends the process with SIGKILL, as a crash would.
func (d *daemon) kill() {
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-d.done
}

// stop ends the process with SIGTERM, as systemd would.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.t.Errorf("staticlet did not exit within 20s of SIGTERM")
		d.kill()
	}
}

func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// pod fetches one pod from the status socket.
func (d *daemon) pod(name string) (*v1.Pod, error) {
	return d.client().Pod(context.Background(), name)
}

// cli runs a staticlet client command against this daemon.
func (d *daemon) cli(args ...string) (string, error) {
	args = append(args, "--status-socket", d.socket)
	out, err := exec.Command(binary(d.t), args...).CombinedOutput()
	return string(out), err
}

// waitPod waits until pod name satisfies cond.
func (d *daemon) waitPod(name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	d.t.Helper()
	var last *v1.Pod
	waitFor(d.t, timeout, what, func() (bool, string) {
		p, err := d.pod(name)
		if err != nil {
			return false, err.Error()
		}
		last = p
		return cond(p), describe(p)
	})
	return last
}

// describe is a one-line summary of a pod's state for failure messages.
func describe(p *v1.Pod) string {
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

func running(p *v1.Pod) bool {
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

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
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

// notifyListener stands in for systemd's NOTIFY_SOCKET.
type notifyListener struct {
	path string
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t testing.TB, path string) *notifyListener {
	t.Helper()
	_ = os.Remove(path)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifyListener{path: path}
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

// lines returns every line received so far.
func (n *notifyListener) lines() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.msgs...)
}

// has tells whether a line with prefix arrived, and returns the last one.
func (n *notifyListener) has(prefix string) (string, bool) {
	lines := n.lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i], true
		}
	}
	return "", false
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// containerIDs lists the IDs of containers in staticlet's namespace.
func (e *env) containers(ctx context.Context) []client.Container {
	e.t.Helper()
	cs, err := e.client.Containers(nsCtx(ctx))
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// processRunning tells whether pid is alive and not a zombie.
func processRunning(pid int) bool {
	p, err := procfs.Read(pid)
	return err == nil && p.State != 'Z'
}

// cmdline returns the arguments of process pid.
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func ids(cs []client.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ID())
	}
	return out
}

func nsCtx(ctx context.Context) context.Context { return namespaces.WithNamespace(ctx, testNS) }

// pidOf returns the process of the container a status names.
func (e *env) pidOf(cs v1.ContainerStatus) (int, error) {
	id := strings.TrimPrefix(cs.ContainerID, "containerd://")
	if id == "" {
		return 0, errors.New("no container ID in status")
	}
	ctx := nsCtx(context.Background())
	c, err := e.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return 0, err
	}
	return int(task.Pid()), nil
}

// trappedFile is the file, in a container's root, that a test's script
// creates once its traps are set; see waitTrapped.
const trappedFile = "/tmp/trapped"

// waitTrapped waits until the script of every container of pod p has set
// its traps, which it tells by creating trappedFile. Neither the pod
// running nor the process's signal masks tell it: until runc's init has
// executed the script's shell, the container's process is that init, a Go
// program that catches every signal; and a stop signal reaching the shell
// before its trap is discarded, the shell being its PID namespace's init,
// so the container runs on until SIGKILL.
func (e *env) waitTrapped(p *v1.Pod) {
	e.t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		pid, err := e.pidOf(cs)
		if err != nil {
			e.t.Fatalf("the process of %s: %v", cs.Name, err)
		}
		path := fmt.Sprintf("/proc/%d/root%s", pid, trappedFile)
		waitFor(e.t, 10*time.Second, cs.Name+" trapping signals", func() (bool, string) {
			_, err := os.Stat(path)
			return err == nil, fmt.Sprint(err)
		})
	}
}
