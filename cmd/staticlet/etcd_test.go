package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/etcdtest"
)

// Where kubeadm's etcd manifest mounts the certificates and the data.
const (
	etcdPKIDir  = "/etc/kubernetes/pki/etcd"
	etcdDataDir = "/var/lib/etcd"
)

// etcdPod is the full name of etcdNode's pod.
const etcdPod = "etcd-" + testNode

// etcdWait bounds a wait for etcd to turn Ready: its startup probe first
// runs 10s after the container starts, as kubeadm writes it.
const etcdWait = 60 * time.Second

// etcdNode is a local etcd as kubeadm sets one up on a control-plane node
// (etcdtest.Member: its ports and flags), with its certificates and data
// in directories of the test's.
type etcdNode struct {
	etcdtest.Member
	pki, data string // host directories, mounted at etcdPKIDir and etcdDataDir
}

// newEtcdNode writes kubeadm's etcd certificates into dir/pki and picks
// the ports; dir/data is etcd's data directory (staticlet creates it, as
// the volume's type is DirectoryOrCreate).
func newEtcdNode(tb testing.TB, dir string) *etcdNode {
	tb.Helper()
	m, err := etcdtest.NewMember(testNode)
	if err != nil {
		tb.Fatal(err)
	}
	n := &etcdNode{Member: m, pki: filepath.Join(dir, "pki"), data: filepath.Join(dir, "data")}
	if err := etcdtest.WritePKI(n.pki); err != nil {
		tb.Fatal(err)
	}
	return n
}

// pod is the etcd pod kubeadm 1.30 writes to
// /etc/kubernetes/manifests/etcd.yaml, but for n's ports and directories.
func (n *etcdNode) pod() *v1.Pod {
	probe := func(path string, failureThreshold int32) *v1.Probe {
		return &v1.Probe{
			ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Host: "127.0.0.1", Path: path, Port: intstr.FromInt32(int32(n.MetricsPort)), Scheme: v1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, FailureThreshold: failureThreshold,
		}
	}
	hostPath := func(name, path string) v1.Volume {
		t := v1.HostPathDirectoryOrCreate
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	priority := int32(2000001000)
	return &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "etcd", Namespace: metav1.NamespaceSystem,
			Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
			Annotations: map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": n.ClientURL()},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:            "etcd",
				Image:           etcdtest.ImageRef,
				ImagePullPolicy: v1.PullIfNotPresent,
				Command:         append([]string{"etcd"}, n.Flags(etcdPKIDir, etcdDataDir)...),
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi"),
				}},
				VolumeMounts: []v1.VolumeMount{
					{Name: "etcd-data", MountPath: etcdDataDir},
					{Name: "etcd-certs", MountPath: etcdPKIDir},
				},
				LivenessProbe: probe("/health?exclude=NOSPACE&serializable=true", 8),
				StartupProbe:  probe("/health?serializable=false", 24),
			}},
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Priority:          &priority,
			SecurityContext:   &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			Volumes:           []v1.Volume{hostPath("etcd-certs", n.pki), hostPath("etcd-data", n.data)},
		},
	}
}

// etcdManifest is p as YAML, as kubeadm writes it.
func etcdManifest(tb testing.TB, p *v1.Pod) string {
	tb.Helper()
	b, err := yaml.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// client is a client of n's etcd, closed when the test ends.
func (n *etcdNode) client(tb testing.TB) *etcdtest.Client {
	tb.Helper()
	c, err := etcdtest.NewClient(n.ClientURL(), n.pki)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// etcdArchive is the etcd image archive, built once per process: etcd
// itself is built once per machine (make test builds it before the tests).
var etcdArchive = sync.OnceValues(func() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.BuildTimeout)
	defer cancel()
	bin, err := etcdtest.Build(ctx)
	if err != nil {
		return nil, err
	}
	return etcdtest.Archive(bin)
})

// importEtcd imports the etcd image into namespace ns of ctrd.
func importEtcd(tb testing.TB, ctrd *ctrdtest.Env, ns string) {
	tb.Helper()
	archive, err := etcdArchive()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := ctrd.Import(ctx, ns, bytes.NewReader(archive)); err != nil {
		tb.Fatal(err)
	}
}

// writeEtcd writes p as the etcd manifest, etcd.yaml, and waits until
// staticlet reports the pod Ready and cond holds. A test that adds a pod
// depending on etcd calls it first.
func (e *env) writeEtcd(d *daemon, p *v1.Pod, what string, cond func(*v1.Pod) bool) *v1.Pod {
	e.t.Helper()
	start := time.Now()
	e.write("etcd.yaml", etcdManifest(e.t, p))
	ready := d.waitPod(etcdPod, etcdWait, what, func(p *v1.Pod) bool { return podReady(p) && cond(p) })
	e.t.Logf("%s %.1fs after the manifest was written", what, time.Since(start).Seconds())
	return ready
}

// etcdState is what the test compares of etcd's pod across a change.
type etcdState struct {
	containerID string
	pid         int
	sandbox     string
	restarts    int32
}

func (e *env) etcdState(p *v1.Pod) etcdState {
	e.t.Helper()
	if len(p.Status.ContainerStatuses) != 1 {
		e.t.Fatalf("pod %s has %d container statuses, want 1", p.Name, len(p.Status.ContainerStatuses))
	}
	cs := p.Status.ContainerStatuses[0]
	pid, err := e.pidOf(cs)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx := nsCtx(e.t.Context())
	c, err := e.client.LoadContainer(ctx, strings.TrimPrefix(cs.ContainerID, "containerd://"))
	if err != nil {
		e.t.Fatal(err)
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		e.t.Fatal(err)
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
	e := newEnv(t)
	importEtcd(t, e.ctrd, testNS)
	d := e.start()
	n := newEtcdNode(t, filepath.Join(e.dir, "etcd"))
	p := e.writeEtcd(d, n.pod(), "etcd Ready", func(*v1.Pod) bool { return true })
	out, err := d.cli("get", "pods")
	if err != nil || !strings.Contains(out, etcdPod) || !strings.Contains(out, "1/1") || !strings.Contains(out, "Running") {
		t.Errorf("staticlet get pods = %q, %v; want %s 1/1 Running", out, err, etcdPod)
	}
	first := e.etcdState(p)
	c := n.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Put(ctx, "/staticlet/etcd-test", "kept"); err != nil {
		t.Fatal(err)
	}

	// A crash of staticlet: the new one adopts etcd as it runs.
	d.kill()
	start := time.Now()
	d = e.start()
	p = d.waitPod(etcdPod, etcdWait, "etcd adopted and Ready", podReady)
	t.Logf("etcd adopted and Ready %.1fs after staticlet was started again", time.Since(start).Seconds())
	if got := e.etcdState(p); got != first {
		t.Errorf("etcd after staticlet's restart = %+v, want %+v (the same container and process)", got, first)
	}
	wantKey(t, c, "/staticlet/etcd-test", "kept", "after staticlet's restart")

	// A flag added: a new container, in the same sandbox, on the same data.
	edited := n.pod()
	edited.Spec.Containers[0].Command = append(edited.Spec.Containers[0].Command, "--quota-backend-bytes=8589934592")
	p = e.writeEtcd(d, edited, "etcd Ready with --quota-backend-bytes", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].ContainerID != first.containerID
	})
	second := e.etcdState(p)
	if second.sandbox != first.sandbox || processRunning(first.pid) || !slices.Contains(cmdline(second.pid), "--quota-backend-bytes=8589934592") {
		t.Errorf("etcd after a flag was added = %+v (first %+v, its process running: %v, arguments %q); want a new process with the flag in the same sandbox",
			second, first, processRunning(first.pid), cmdline(second.pid))
	}
	wantKey(t, c, "/staticlet/etcd-test", "kept", "after a flag was added")

	// A label changed: a new pod, sandbox and all, on the same data.
	edited.Labels["tier"] = "etcd"
	p = e.writeEtcd(d, edited, "etcd Ready with a new label", func(p *v1.Pod) bool {
		return p.Labels["tier"] == "etcd" && p.Status.ContainerStatuses[0].ContainerID != second.containerID
	})
	third := e.etcdState(p)
	if third.sandbox == second.sandbox || processRunning(second.pid) || third.restarts != 0 {
		t.Errorf("etcd after a label changed = %+v (before %+v, its process running: %v); want a new pod, restart count 0",
			third, second, processRunning(second.pid))
	}
	wantKey(t, c, "/staticlet/etcd-test", "kept", "after a label changed")

	// A pod that needs etcd, as kube-apiserver does: it starts once etcd
	// is Ready and, when both manifests go at once, stops first, while
	// etcd still answers.
	outDir := filepath.Join(e.dir, "out")
	health := fmt.Sprintf("http://127.0.0.1:%d/health", n.MetricsPort)
	e.write("api.yaml", dependentPod("api", metav1.NamespaceSystem, "etcd", health, outDir))
	e.waitTrapped(d.waitPod("api-"+testNode, time.Minute, "api Ready", podReady))
	if got := readOut(t, outDir, "api.start"); got != "up" {
		t.Errorf("the pod that needs etcd found it %s when it started, want up", got)
	}
	e.remove("etcd.yaml")
	e.remove("api.yaml")
	for _, name := range []string{etcdPod, "api-" + testNode} {
		waitFor(t, time.Minute, name+" gone", func() (bool, string) {
			_, err := d.pod(name)
			return err != nil, fmt.Sprint(err)
		})
	}
	if got := readOut(t, outDir, "api.term"); got != "up" {
		t.Errorf("the pod that needs etcd found it %s at SIGTERM, want up: it stops first", got)
	}
}
