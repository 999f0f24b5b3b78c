package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// waitWorld is a status socket served from a store, as staticlet serves
// it, for running `staticlet wait` in-process against it.
type waitWorld struct {
	t      *testing.T
	store  *status.Store
	socket string
	asked  atomic.Int64 // requests for one pod
}

func newWaitWorld(t *testing.T) *waitWorld {
	t.Helper()
	dir, err := os.MkdirTemp("", "wt") // short: a socket path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &waitWorld{t: t, store: status.NewStore(), socket: filepath.Join(dir, "s.sock")}
}

// serve answers on the socket until the test ends.
func (w *waitWorld) serve() {
	w.t.Helper()
	h := status.NewServer(status.ServerConfig{Store: w.store}).Handler()
	ln, err := net.Listen("unix", w.socket)
	if err != nil {
		w.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/pods/") {
			w.asked.Add(1)
		}
		h.ServeHTTP(rw, r)
	})}
	go srv.Serve(ln)
	w.t.Cleanup(func() { srv.Close() })
}

// setPod records a static pod of node "node" named name-node, in phase
// with condition Ready as given.
func (w *waitWorld) setPod(ns, name string, phase v1.PodPhase, ready bool) {
	w.store.SetPod(testPod(ns, name, phase, ready))
}

// testPod is the pod setPod sets.
func testPod(ns, name string, phase v1.PodPhase, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.FullName(name, "node")},
		Spec:       v1.PodSpec{NodeName: "node", Containers: []v1.Container{{Name: "c"}}},
		Status:     v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}},
	}
}

// waitResult is what a `staticlet wait` run printed and returned.
type waitResult struct {
	out string
	err error
}

// start runs `staticlet wait args...` in-process against the socket; its
// result arrives on the channel.
func (w *waitWorld) start(args ...string) <-chan waitResult {
	ch := make(chan waitResult, 1)
	cmd := rootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(append([]string{"wait", "--status-socket", w.socket}, args...))
	go func() {
		err := cmd.ExecuteContext(context.Background())
		ch <- waitResult{out.String(), err}
	}()
	return ch
}

// run runs `staticlet wait args...` to its end.
func (w *waitWorld) run(args ...string) waitResult {
	w.t.Helper()
	select {
	case r := <-w.start(args...):
		return r
	case <-time.After(30 * time.Second):
		w.t.Fatalf("staticlet wait %q did not end within 30s", args)
		return waitResult{}
	}
}

// waitAsked waits until wait has asked for a pod n times in all: it is
// polling.
func (w *waitWorld) waitAsked(n int64) {
	w.t.Helper()
	harness.WaitFor(w.t, 10*time.Second, "wait to ask for the pod", func() (bool, string) {
		got := w.asked.Load()
		return got >= n, fmt.Sprintf("asked %d times", got)
	})
}

// check fails the test unless r printed wantOut and ended with an error
// saying wantErr (nil when wantErr is empty), exit code 1 and kubectl's
// form.
func (r waitResult) check(t *testing.T, wantOut, wantErr string) {
	t.Helper()
	if r.out != wantOut {
		t.Errorf("wait printed %q, want %q", r.out, wantOut)
	}
	switch {
	case wantErr == "" && r.err != nil:
		t.Errorf("wait = %v, want success", r.err)
	case wantErr != "" && (r.err == nil || r.err.Error() != wantErr):
		t.Errorf("wait = %v, want %q", r.err, wantErr)
	case wantErr != "" && ExitCode(r.err) != 1:
		t.Errorf("wait exit code %d, want 1", ExitCode(r.err))
	}
}

// TestWaitCommand runs `staticlet wait` in-process against a status
// socket served from a store: the outcomes and messages of kubectl wait,
// the waits kubectl does not do (for staticlet to come up, for a pod to
// appear), and what ends a wait at once.
func TestWaitCommand(t *testing.T) {
	t.Run("met at once, by manifest name", func(t *testing.T) {
		w := newWaitWorld(t)
		w.serve()
		w.setPod("kube-system", "etcd", v1.PodRunning, true)
		w.run("--for=condition=Ready", "pod/etcd").check(t, "pod/etcd-node condition met\n", "")
		w.run("--for=condition=ready", "-n", "kube-system", "etcd-node", "--timeout=0").check(t, "pod/etcd-node condition met\n", "")
		w.run("--for=jsonpath={.status.phase}=Running", "pods/etcd").check(t, "pod/etcd-node condition met\n", "")
	})
	t.Run("waits for staticlet, then for the pod, then for Ready", func(t *testing.T) {
		w := newWaitWorld(t)
		res := w.start("--for=condition=Ready", "pod/web", "--timeout=20s")
		w.serve()
		w.waitAsked(2) // a 404: the pod is not there yet
		w.setPod("default", "web", v1.PodPending, false)
		w.waitAsked(w.asked.Load() + 2)
		select {
		case r := <-res:
			t.Fatalf("wait ended on a pod not Ready: %q, %v", r.out, r.err)
		default:
		}
		w.setPod("default", "web", v1.PodRunning, true)
		(<-res).check(t, "pod/web-node condition met\n", "")
	})
	t.Run("several pods, one timeout", func(t *testing.T) {
		w := newWaitWorld(t)
		w.serve()
		w.setPod("default", "a", v1.PodRunning, true)
		w.setPod("default", "b", v1.PodRunning, false)
		w.run("--for=condition=Ready", "pod", "a", "b", "--timeout=500ms").check(t,
			"pod/a-node condition met\n", "timed out waiting for the condition on pods/b")
		w.run("--for=condition=Ready=false", "pod/a", "pod/b", "--timeout=0").check(t,
			"", "condition not met for pods/a")
	})
	t.Run("timeout", func(t *testing.T) {
		w := newWaitWorld(t)
		w.run("--for=condition=Ready", "pod/web", "--timeout=300ms").check(t, "", "timed out waiting for the condition on pods/web")
		w.serve()
		w.run("--for=delete", "pod/web", "--timeout=300ms").check(t, "", "timed out waiting for the condition on pods/web")
	})
	t.Run("check once", func(t *testing.T) {
		w := newWaitWorld(t)
		r := w.run("--for=condition=Ready", "pod/web", "--timeout=0")
		if !errors.Is(r.err, status.ErrNotRunning) {
			t.Errorf("wait --timeout=0 without staticlet = %v, want it unreachable", r.err)
		}
		w.serve()
		w.store.SetReady()
		r = w.run("--for=condition=Ready", "pod/web", "--timeout=0")
		r.check(t, "", `Error from server (NotFound): pods "web" not found`)
		if e, ok := r.err.(*exitError); !ok || !e.raw {
			t.Errorf("wait = %#v, want the message printed as it is", r.err)
		}
		w.setPod("default", "web", v1.PodPending, false)
		w.run("--for=condition=Ready", "pod/web", "--timeout=0").check(t, "", "condition not met for pods/web")
		w.run("--for=delete", "pod/web", "--timeout=0").check(t, "", "condition not met for pods/web")
		w.run("--for=delete", "pod/gone", "--timeout=0").check(t, "pod/gone condition met\n", "")
	})
	t.Run("delete", func(t *testing.T) {
		w := newWaitWorld(t)
		w.serve()
		w.setPod("default", "web", v1.PodRunning, true)
		w.store.SetReady()
		res := w.start("--for=delete", "pod/web", "--timeout=20s")
		w.waitAsked(2)
		w.store.DeletePod(pod.Key{Namespace: "default", Name: "web-node"})
		(<-res).check(t, "pod/web-node condition met\n", "")
	})
	t.Run("delete waits for staticlet to be ready", func(t *testing.T) {
		w := newWaitWorld(t)
		w.serve()
		res := w.start("--for=delete", "pod/web", "--timeout=20s")
		w.waitAsked(2)
		select {
		case r := <-res:
			t.Fatalf("wait for delete ended before staticlet was ready: %q, %v", r.out, r.err)
		default:
		}
		w.store.SetReady()
		(<-res).check(t, "pod/web condition met\n", "")
	})
	t.Run("all", func(t *testing.T) {
		w := newWaitWorld(t)
		w.serve()
		w.store.SetManifests([]status.Manifest{
			{Path: "/m/a.yaml", Pods: []string{"default/a-node"}},
			{Path: "/m/b.yaml", Pods: []string{"kube-system/b-node"}},
			{Path: "/m/bad.yaml", Error: "invalid"},
		})
		res := w.start("--for=condition=Ready", "--all", "--timeout=20s")
		w.store.SetReady()
		w.waitAsked(1)
		w.setPod("kube-system", "b", v1.PodRunning, true)
		w.setPod("default", "a", v1.PodRunning, true)
		(<-res).check(t, "pod/a-node condition met\npod/b-node condition met\n", "")
		w.run("--for=condition=Ready", "pods", "--all", "-n", "kube-system").check(t, "pod/b-node condition met\n", "")
		w.run("--for=condition=Ready", "--all", "-n", "other").check(t, "", "no matching resources found")
		w.setPod("default", "orphan", v1.PodRunning, true) // no manifest: being removed
		w.run("--for=delete", "--all", "--timeout=0").check(t, "", "condition not met for pods/a-node")
	})
	t.Run("fails at once", func(t *testing.T) {
		w := newWaitWorld(t)
		w.serve()
		w.setPod("a", "dup", v1.PodRunning, true)
		w.setPod("b", "dup", v1.PodRunning, true)
		for _, tt := range []struct{ args, wantErr string }{
			{"--for=condition=Ready pod/dup", `getting pod "dup": pod name "dup" is ambiguous (a/dup-node, b/dup-node): use namespace/name`},
			{"--for=jsonpath={..name} -n a pod/dup", "given jsonpath expression matches more than one value"},
			{"--for=condition=Ready deployment/dup", `"deployment/dup": staticlet waits for pods only: give pod/NAME, and -n for a namespace`},
			{"pod/dup", "--for is required: " + forUsage},
		} {
			w.run(append(strings.Fields(tt.args), "--timeout=1m")...).check(t, "", tt.wantErr)
		}
	})
}
