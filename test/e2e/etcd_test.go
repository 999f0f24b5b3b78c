package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/testutil/etcdtest"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// etcdPod is the full name of etcdNode's pod.
const etcdPod = "etcd-" + harness.TestNode

// etcdWait bounds a wait for etcd to turn Ready: its startup probe first
// runs 10s after the container starts, as kubeadm writes it.
const etcdWait = 60 * time.Second

// writeEtcd writes p as the etcd manifest, etcd.yaml, and waits until
// staticlet reports the pod Ready and cond holds. A test that adds a pod
// depending on etcd calls it first.
func writeEtcd(e *harness.Env, d *harness.Daemon, p *v1.Pod, what string, cond func(*v1.Pod) bool) *v1.Pod {
	e.T.Helper()
	start := time.Now()
	e.Write("etcd.yaml", harness.EtcdManifest(e.T, p))
	ready := d.WaitPod(etcdPod, etcdWait, what, func(p *v1.Pod) bool { return podReady(p) && cond(p) })
	e.T.Logf("%s %.1fs after the manifest was written", what, time.Since(start).Seconds())
	return ready
}

// etcdState is what the test compares of etcd's pod across a change.
type etcdState struct {
	containerID string
	pid         int
	sandbox     string
	restarts    int32
}

func etcdStateOf(e *harness.Env, p *v1.Pod) etcdState {
	e.T.Helper()
	if len(p.Status.ContainerStatuses) != 1 {
		e.T.Fatalf("pod %s has %d container statuses, want 1", p.Name, len(p.Status.ContainerStatuses))
	}
	cs := p.Status.ContainerStatuses[0]
	pid, err := e.PidOf(cs)
	if err != nil {
		e.T.Fatal(err)
	}
	ctx := harness.NSCtx(e.T.Context())
	c, err := e.Client.LoadContainer(ctx, strings.TrimPrefix(cs.ContainerID, "containerd://"))
	if err != nil {
		e.T.Fatal(err)
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	return etcdState{cs.ContainerID, pid, labels[sandbox.LabelSandboxID], cs.RestartCount}
}

// wantKey checks etcd holds key with value.
func wantKey(t *testing.T, c *etcdtest.Client, key, value, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got, ok, err := c.Get(ctx, key)
	if err != nil || !ok || got != value {
		t.Errorf("%s: etcd key %s = %q (found %v, err %v), want %q", when, key, got, ok, err, value)
	}
}

// TestEtcd runs etcd (the release kubeadm 1.30 pins) from kubeadm's
// manifest, certificates and all, and checks what a control-plane node
// needs of staticlet: etcd turns Ready and serves; staticlet killed with
// SIGKILL and started again adopts the same process; an edit of the
// command line replaces the container in its sandbox, and an edit of a
// label the whole pod, and each time etcd comes back Ready on the same
// data.
func TestEtcd(t *testing.T) {
	e := harness.NewEnv(t)
	harness.ImportEtcd(t, e.Ctrd, harness.TestNS)
	d := e.Start()
	n := harness.NewEtcdNode(t, filepath.Join(e.Dir, "etcd"))
	p := writeEtcd(e, d, n.Pod(), "etcd Ready", func(*v1.Pod) bool { return true })
	out, err := d.CLI("get", "pods")
	if err != nil || !strings.Contains(out, etcdPod) || !strings.Contains(out, "1/1") || !strings.Contains(out, "Running") {
		t.Errorf("staticlet get pods = %q, %v; want %s 1/1 Running", out, err, etcdPod)
	}
	first := etcdStateOf(e, p)
	c := n.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Put(ctx, "/staticlet/etcd-test", "kept"); err != nil {
		t.Fatal(err)
	}

	// A crash of staticlet: the new one adopts etcd as it runs.
	d.Kill()
	start := time.Now()
	d = e.Start()
	p = d.WaitPod(etcdPod, etcdWait, "etcd adopted and Ready", podReady)
	t.Logf("etcd adopted and Ready %.1fs after staticlet was started again", time.Since(start).Seconds())
	if got := etcdStateOf(e, p); got != first {
		t.Errorf("etcd after staticlet's restart = %+v, want %+v (the same container and process)", got, first)
	}
	wantKey(t, c, "/staticlet/etcd-test", "kept", "after staticlet's restart")

	// A flag added: a new container, in the same sandbox, on the same data.
	edited := n.Pod()
	edited.Spec.Containers[0].Command = append(edited.Spec.Containers[0].Command, "--quota-backend-bytes=8589934592")
	p = writeEtcd(e, d, edited, "etcd Ready with --quota-backend-bytes", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].ContainerID != first.containerID
	})
	second := etcdStateOf(e, p)
	if second.sandbox != first.sandbox || harness.ProcessRunning(first.pid) || !slices.Contains(harness.Cmdline(second.pid), "--quota-backend-bytes=8589934592") {
		t.Errorf("etcd after a flag was added = %+v (first %+v, its process running: %v, arguments %q); want a new process with the flag in the same sandbox",
			second, first, harness.ProcessRunning(first.pid), harness.Cmdline(second.pid))
	}
	wantKey(t, c, "/staticlet/etcd-test", "kept", "after a flag was added")

	// A label changed: a new pod, sandbox and all, on the same data.
	edited.Labels["tier"] = "etcd"
	p = writeEtcd(e, d, edited, "etcd Ready with a new label", func(p *v1.Pod) bool {
		return p.Labels["tier"] == "etcd" && p.Status.ContainerStatuses[0].ContainerID != second.containerID
	})
	third := etcdStateOf(e, p)
	if third.sandbox == second.sandbox || harness.ProcessRunning(second.pid) || third.restarts != 0 {
		t.Errorf("etcd after a label changed = %+v (before %+v, its process running: %v); want a new pod, restart count 0",
			third, second, harness.ProcessRunning(second.pid))
	}
	wantKey(t, c, "/staticlet/etcd-test", "kept", "after a label changed")

	// A pod that needs etcd, as kube-apiserver does: it starts once etcd
	// is Ready and, when both manifests go at once, stops first, while
	// etcd still answers.
	outDir := filepath.Join(e.Dir, "out")
	health := fmt.Sprintf("http://127.0.0.1:%d/health", n.MetricsPort)
	e.Write("api.yaml", dependentPod("api", metav1.NamespaceSystem, "etcd", health, outDir))
	e.WaitTrapped(d.WaitPod("api-"+harness.TestNode, time.Minute, "api Ready", podReady))
	if got := readOut(t, outDir, "api.start"); got != "up" {
		t.Errorf("the pod that needs etcd found it %s when it started, want up", got)
	}
	e.Remove("etcd.yaml")
	e.Remove("api.yaml")
	for _, name := range []string{etcdPod, "api-" + harness.TestNode} {
		harness.WaitFor(t, time.Minute, name+" gone", func() (bool, string) {
			_, err := d.Pod(name)
			return err != nil, fmt.Sprint(err)
		})
	}
	if got := readOut(t, outDir, "api.term"); got != "up" {
		t.Errorf("the pod that needs etcd found it %s at SIGTERM, want up: it stops first", got)
	}
}
