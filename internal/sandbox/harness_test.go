package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// testNS is the containerd namespace the tests' Runtimes use.
const testNS = "staticlet"

// opTimeout bounds each Runtime call a test makes.
const opTimeout = 60 * time.Second

// TestMain removes the staticlet binary built for the pause sandboxes.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtDir  string
	builtBin  string
	buildErr  error
)

// pauseBinary returns the static staticlet binary the sandboxes run as
// their pause program: the one `make test` built (STATICLET_BIN), or one
// built here once per test process.
func pauseBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("STATICLET_BIN"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		// go test puts its own go first in PATH.
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %v", err)
			return
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			buildErr = fmt.Errorf("go env GOMOD: not in a module")
			return
		}
		builtDir, buildErr = os.MkdirTemp("", "staticlet-bin")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(builtDir, "staticlet")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/staticlet")
		cmd.Dir = filepath.Dir(gomod)
		// Static: the pause root holds nothing but the program.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building staticlet: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// harness is one test's world: a private containerd holding the test image
// and a Runtime driving it, with short directories of its own.
type harness struct {
	t      *testing.T
	env    *ctrdtest.Env
	rt     *Runtime
	client *client.Client
	image  client.Image
	root   string
	logs   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with a Runtime configured, in the end, by
// configure.
func newHarnessWith(t *testing.T, configure func(*Config)) *harness {
	t.Helper()
	// The directories go before the daemon, so that they are removed after
	// it stopped and nothing is mounted from them any more.
	root := shortTempDir(t)
	logs := shortTempDir(t)
	env := ctrdtest.Start(t)
	img := env.ImportImage(t, testNS, testimage.DefaultRef)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cfg := Config{
		Address:     env.Address,
		Namespace:   testNS,
		RootDir:     root,
		Logs:        LogConfig{Dir: logs},
		Snapshotter: env.Snapshotter,
		// The ordinary pods of a class share one shim until it is full.
		ShimSpread: 1,
	}
	if configure != nil {
		configure(&cfg)
	}
	rt, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return &harness{t: t, env: env, rt: rt, client: env.Client(t), image: img, root: root, logs: logs}
}

// shortTempDir makes a temp directory with a short path and removes it when
// the test ends.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// ctx returns a context for one Runtime call, ended when the test ends.
func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	h.t.Cleanup(cancel)
	return ctx
}

// nsCtx returns a context in staticlet's namespace for the test's own
// containerd client.
func (h *harness) nsCtx() context.Context {
	return namespaces.WithNamespace(h.ctx(), testNS)
}

// decode decodes one pod manifest from path name (which takes part in the
// pod's UID) on node "n".
func (h *harness) decode(name, manifest string) *pod.Pod {
	h.t.Helper()
	pods, err := pod.Decode(name, []byte(manifest), pod.Options{NodeName: "n"})
	if err != nil {
		h.t.Fatalf("pod.Decode(%s): %v\n%s", name, err, manifest)
	}
	if len(pods) != 1 {
		h.t.Fatalf("pod.Decode(%s): got %d pods, want 1", name, len(pods))
	}
	return pods[0]
}

// sandbox creates and starts p's sandbox and removes it when the test ends.
func (h *harness) sandbox(p *pod.Pod) pod.Record {
	h.t.Helper()
	return h.startSandbox(h.createSandbox(p))
}

// createSandbox creates p's sandbox without starting it, and removes it
// when the test ends.
func (h *harness) createSandbox(p *pod.Pod) pod.Record {
	h.t.Helper()
	// The pod's cgroup goes last, after its containers (cleanups run in
	// reverse).
	h.t.Cleanup(func() {
		if err := h.rt.removePodCgroups(context.Background(), string(p.UID)); err != nil {
			h.t.Errorf("removing the cgroups of pod %s: %v", p, err)
		}
	})
	rec, err := h.rt.CreateSandbox(h.ctx(), p)
	if err != nil {
		h.t.Fatalf("CreateSandbox(%s): %v", p, err)
	}
	h.removeAtEnd(rec.ID)
	return rec
}

// pauseSandbox creates and starts a sandbox of p with a pause process, as
// earlier builds made every sandbox, whether p shares its PID namespace
// or not, and removes it when the test ends.
func (h *harness) pauseSandbox(p *pod.Pod) pod.Record {
	h.t.Helper()
	sb := h.startSandbox(h.pauseCreated(p))
	if sb.Pid == 0 {
		h.t.Fatalf("sandbox %s started with no pause process", sb.ID)
	}
	return sb
}

// pauseCreated creates a sandbox of p with a pause process, not started,
// as pauseSandbox does, and removes it when the test ends.
func (h *harness) pauseCreated(p *pod.Pod) pod.Record {
	h.t.Helper()
	sb := h.createSandbox(p)
	if sb.NoPause {
		c, err := h.client.LoadContainer(h.nsCtx(), sb.ID)
		if err != nil {
			h.t.Fatal(err)
		}
		// An empty value removes a label.
		if _, err := c.SetLabels(h.nsCtx(), map[string]string{LabelPause: "", LabelBoot: "", LabelPins: ""}); err != nil {
			h.t.Fatal(err)
		}
		sb.NoPause, sb.State = false, pod.TaskCreated
	}
	return sb
}

// podNS is namespace ns (net, ipc or uts) of the pod of sandbox sb, in
// the form of nsLink: its pause process's, or, with none, its pin's.
func (h *harness) podNS(sb pod.Record, ns string) string {
	h.t.Helper()
	if sb.Pid != 0 {
		return nsLink(h.t, sb.Pid, ns)
	}
	return pinInode(h.t, h.rt.sandboxDir(sb.ID), netns.Kind(ns))
}

// startSandbox starts a sandbox createSandbox made.
func (h *harness) startSandbox(sb pod.Record) pod.Record {
	h.t.Helper()
	rec, err := h.rt.StartSandbox(h.ctx(), sb)
	if err != nil {
		h.t.Fatalf("StartSandbox(%s): %v", sb.ID, err)
	}
	return rec
}

// start starts p's container name in sandbox sb and removes it when the
// test ends.
func (h *harness) start(p *pod.Pod, sb pod.Record, name string, attempt int) pod.Record {
	h.t.Helper()
	rec, err := h.rt.StartContainer(h.ctx(), h.request(p, sb, name, attempt))
	if err != nil {
		h.t.Fatalf("StartContainer(%s, %s): %v", p, name, err)
	}
	h.removeAtEnd(rec.ID)
	return rec
}

func (h *harness) request(p *pod.Pod, sb pod.Record, name string, attempt int) pod.ContainerRequest {
	h.t.Helper()
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return pod.ContainerRequest{Pod: p, Sandbox: sb, Container: &p.Spec.Containers[i], Kind: pod.KindApp, Attempt: attempt}
		}
	}
	h.t.Fatalf("pod %s has no container %q", p, name)
	return pod.ContainerRequest{}
}

func (h *harness) removeAtEnd(id string) {
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := h.rt.RemoveContainer(ctx, id); err != nil {
			h.t.Errorf("RemoveContainer(%s): %v", id, err)
		}
	})
}

// containers returns the IDs of every container in staticlet's namespace.
func (h *harness) containers() []string {
	h.t.Helper()
	cs, err := h.client.Containers(h.nsCtx())
	if err != nil {
		h.t.Fatalf("listing containers: %v", err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID())
	}
	return ids
}

// activeSnapshots returns the keys of the snapshots containers write to;
// the image's layers are committed ones.
func (h *harness) activeSnapshots() []string {
	h.t.Helper()
	var keys []string
	err := h.client.SnapshotService(h.env.Snapshotter).Walk(h.nsCtx(), func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			keys = append(keys, info.Name)
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("walking snapshots: %v", err)
	}
	return keys
}

// waitFor polls cond until it holds, failing the test with what and cond's
// last explanation when timeout passes first.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nsLink returns the namespace link of pid ("self" for the test), such as
// "net:[4026531840]".
func nsLink(t *testing.T, pid any, ns string) string {
	t.Helper()
	l, err := os.Readlink(fmt.Sprintf("/proc/%v/ns/%s", pid, ns))
	if err != nil {
		t.Fatalf("reading the %s namespace of %v: %v", ns, pid, err)
	}
	return l
}

// cmdline returns the arguments of pid.
func cmdline(t *testing.T, pid uint32) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("reading the command line of %d: %v", pid, err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// environ returns the environment pid started with.
func environ(t *testing.T, pid uint32) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("reading the environment of %d: %v", pid, err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// gone says whether pid no longer exists (or is a zombie nobody reaped yet).
func gone(pid uint32) bool {
	p, err := procfs.Read(int(pid))
	return err != nil || p.State == 'Z'
}

// utsHostname returns the host name in pid's UTS namespace. It enters the
// namespace on a thread of its own; if it cannot leave it again, the thread
// stays locked and Go discards it.
func utsHostname(t *testing.T, pid uint32) string {
	t.Helper()
	type result struct {
		name string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/uts")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer self.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/uts", pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWUTS); err != nil {
			ch <- result{err: fmt.Errorf("entering the UTS namespace of %d: %w", pid, err)}
			return
		}
		var u unix.Utsname
		unameErr := unix.Uname(&u)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWUTS); err != nil {
			ch <- result{err: fmt.Errorf("leaving the UTS namespace of %d: %w", pid, err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{name: unix.ByteSliceToString(u.Nodename[:]), err: unameErr}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.name
}

// shimCount returns how many runc shims serve the daemon at address.
func shimCount(t *testing.T, address string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if (args[i] == "-address" || args[i] == "--address") && args[i+1] == address {
				n++
				break
			}
		}
	}
	return n
}
