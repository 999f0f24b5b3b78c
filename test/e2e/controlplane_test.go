package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// answers tells whether url answers a GET with 200.
func answers(url string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// apiserverStandIn is kube-apiserver as kubeadm v1.30 writes it, as far
// as staticlet can tell: host network, --etcd-servers naming etcd's client
// URL, --secure-port, and the kubeadm probes on that port, their initial
// delays included, so that it is not Ready 5s after its start. Its process
// is a dependentPod's: it hangs on SIGTERM when etcd's health endpoint
// (health) no longer answers, as a kube-apiserver with a request in flight
// to a dead etcd does, and writes to out/kube-apiserver.term what it found.
func apiserverStandIn(etcdURL, health, out string, port int) string {
	probe := func(kind, path string, threshold int) string {
		return fmt.Sprintf("    %s:\n      failureThreshold: %d\n      httpGet: {host: 127.0.0.1, path: %s, port: %d, scheme: HTTPS}\n"+
			"      initialDelaySeconds: 10\n      periodSeconds: 10\n      timeoutSeconds: 15\n", kind, threshold, path, port)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels: {component: kube-apiserver, tier: control-plane}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: kube-apiserver
    image: localhost/busybox:test
    command: [sh, -c, %q, kube-apiserver, --advertise-address=127.0.0.1, --etcd-servers=%s, --secure-port=%d, --service-cluster-ip-range=10.96.0.0/12]
    volumeMounts: [{name: out, mountPath: /out}]
%s%s%s  volumes:
  - {name: out, hostPath: {path: %s, type: DirectoryOrCreate}}
`, dependentScript("kube-apiserver", health), etcdURL, port,
		probe("livenessProbe", "/livez", 8), probe("readinessProbe", "/readyz", 3), probe("startupProbe", "/livez", 24), out)
}

// controllerStandIn is kube-controller-manager or kube-scheduler as
// kubeadm v1.30 writes them, as far as staticlet can tell: host network,
// a kubeconfig file to reach the apiserver, and the probes on its own
// secure port. It exits on SIGTERM.
func controllerStandIn(name string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: kube-system
  labels: {component: %[1]s, tier: control-plane}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: %[1]s
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; : > %[3]s; while true; do sleep 1 & wait $!; done", %[1]s,
      --authentication-kubeconfig=/etc/kubernetes/%[1]s.conf, --bind-address=127.0.0.1, --kubeconfig=/etc/kubernetes/%[1]s.conf, --leader-elect=true]
    livenessProbe:
      failureThreshold: 8
      httpGet: {host: 127.0.0.1, path: /healthz, port: %[2]d, scheme: HTTPS}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    startupProbe:
      failureThreshold: 24
      httpGet: {host: 127.0.0.1, path: /healthz, port: %[2]d, scheme: HTTPS}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
`, name, port, harness.TrappedFile)
}

// TestControlPlaneStopOrder: kubeadm's control plane (a real etcd from
// kubeadm's manifest, stand-ins for the other three with kubeadm's
// command lines and probes), removed together 5s after its start, before
// any pod is Ready, stops kube-apiserver while etcd still answers; and so
// again after staticlet was killed and started again, which must read the
// order from the specs, not from history; and again when the manifests
// are removed while staticlet is killed, which must read it from the
// containers' labels. No container is started once the manifests are
// gone.
func TestControlPlaneStopOrder(t *testing.T) {
	e := harness.NewEnv(t)
	harness.ImportEtcd(t, e.Ctrd, harness.TestNS)
	d := e.Start()
	out := filepath.Join(e.Dir, "out")
	full := func(name string) string { return name + "-" + harness.TestNode }
	names := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

	// how: 0 removes the pods as they run, 1 after a kill -9 and restart
	// of staticlet, 2 while staticlet is killed, before its restart.
	round := func(round string, how int) {
		if err := os.Remove(filepath.Join(out, "kube-apiserver.term")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		n := harness.NewEtcdNode(t, filepath.Join(e.Dir, "etcd-"+round))
		e.Write("etcd.yaml", harness.EtcdManifest(t, n.Pod()))
		e.Write("kube-apiserver.yaml", apiserverStandIn(n.ClientURL(), n.HealthURL(), out, harness.FreePort(t)))
		e.Write("kube-controller-manager.yaml", controllerStandIn("kube-controller-manager", harness.FreePort(t)))
		e.Write("kube-scheduler.yaml", controllerStandIn("kube-scheduler", harness.FreePort(t)))
		started := time.Now()
		for _, name := range names[1:] {
			p := d.WaitPod(full(name), time.Minute, name+" running", func(p *v1.Pod) bool {
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
			})
			e.WaitTrapped(p)
		}
		if how == 1 {
			d.Kill()
			d = e.Start()
			for _, name := range names {
				d.WaitPod(full(name), time.Minute, name+" adopted", func(p *v1.Pod) bool {
					return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
				})
			}
		}
		harness.WaitFor(t, time.Minute, "etcd answering", func() (bool, string) {
			err := answers(n.HealthURL())
			return err == nil, fmt.Sprint(err)
		})
		if p, err := d.Pod(full("kube-apiserver")); err != nil || podReady(p) {
			t.Fatalf("%s: kube-apiserver Ready (%v) before its probes' initial delay: the test removes pods that are not Ready yet", round, err)
		}
		started0 := map[string]int{}
		for _, name := range names {
			started0[name] = len(eventsOfKey(d, "kube-system/"+full(name), "Started"))
		}
		t.Logf("%s: removing the control plane %.1fs after its manifests were written", round, time.Since(started).Seconds())
		if how == 2 {
			d.Kill()
		}
		removed := time.Now()
		for _, name := range names {
			e.Remove(name + ".yaml")
		}
		if how == 2 {
			d = e.Start()
			clear(started0) // events are the new staticlet's
		}
		waitAllGone(d, names...)
		harness.WaitFor(t, time.Minute, "every container gone", func() (bool, string) {
			cs, err := e.Client.Containers(harness.NSCtx(t.Context()))
			return err == nil && len(cs) == 0, fmt.Sprint(len(cs), " containers left, ", err)
		})
		t.Logf("%s: every pod gone %.2fs after the manifests were removed", round, time.Since(removed).Seconds())
		if got := readOut(t, out, "kube-apiserver.term"); got != "up" {
			t.Errorf("%s: kube-apiserver found etcd %s at SIGTERM, want up: it stops before etcd", round, got)
		}
		for _, name := range names {
			if n := len(eventsOfKey(d, "kube-system/"+full(name), "Started")); n != started0[name] {
				t.Errorf("%s: %s had %d Started events once removed, %d before: nothing starts once its manifest is gone", round, name, n, started0[name])
			}
		}
	}
	round("cold", 0)
	round("restarted", 1)
	round("removed while staticlet was down", 2)
}
