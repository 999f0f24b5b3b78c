package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// probed is a hostNetwork pod serving WWW with busybox httpd on
// 127.0.0.1:PORT, with a liveness probe HANDLER: one failed run in two
// periods of one second restarts it, with a grace of 2 seconds. SCRIPT
// runs beside httpd (the tcpSocket case closes the port with it).
const probed = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 30
  containers:
  - name: web
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; httpd -f -p 127.0.0.1:PORT -h /www & SCRIPT wait"]
    ports: [{name: web, containerPort: PORT}]
    livenessProbe:
      HANDLER
      periodSeconds: 1
      failureThreshold: 2
      terminationGracePeriodSeconds: 2
    volumeMounts: [{name: www, mountPath: /www}]
  volumes:
  - name: www
    hostPath: {path: WWW}
`

// wwwDir makes a directory served by a test pod, holding the given files.
func wwwDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := markDir(t)
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("ok\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// containerOf returns the status of container name in p.
func containerOf(p *v1.Pod, name string) v1.ContainerStatus {
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// eventsOf returns the events of pod name with reason.
func eventsOf(d *harness.Daemon, name, reason string) []pod.Event {
	d.T.Helper()
	return eventsOfKey(d, "default/"+name, reason)
}

// eventsOfKey returns the events of reason about pod key (namespace/name).
func eventsOfKey(d *harness.Daemon, key, reason string) []pod.Event {
	d.T.Helper()
	events, err := d.Client().Events(d.T.Context(), key)
	if err != nil {
		d.T.Fatal(err)
	}
	var out []pod.Event
	for _, e := range events {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestLivenessRestarts: for each handler, a pod whose health file goes
// away is restarted (after initialDelay + period × failureThreshold +
// grace), once, with an Unhealthy and a Killing event and the killed
// container in lastState.
func TestLivenessRestarts(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	tests := []struct {
		name, handler, script string
	}{
		{"http", "httpGet: {path: /healthz, port: web}", ""},
		{"exec", "exec: {command: [cat, /www/healthz]}", ""},
		{"tcp", "tcpSocket: {port: web}", "while cat /www/healthz >/dev/null 2>&1; do sleep 0.2; done; kill $!; while true; do sleep 1 & wait $!; done;"},
	}
	type probedPod struct {
		name, www string
	}
	var pods []probedPod
	for _, tt := range tests {
		name := "live-" + tt.name
		www := wwwDir(t, "healthz")
		port := harness.FreePort(t)
		e.Write(name+".yaml", strings.NewReplacer("NAME", name, "PORT", strconv.Itoa(port), "WWW", www,
			"HANDLER", tt.handler, "SCRIPT", tt.script).Replace(probed))
		pods = append(pods, probedPod{name + "-" + harness.TestNode, www})
	}
	for _, p := range pods {
		d.WaitPod(p.name, 30*time.Second, p.name+" running and ready", func(p *v1.Pod) bool { return harness.Running(p) && podReady(p) })
	}
	// Healthy pods stay up.
	time.Sleep(3 * time.Second)
	for _, p := range pods {
		if got, _ := d.Pod(p.name); containerOf(got, "web").RestartCount != 0 {
			t.Errorf("%s restarted while healthy: %s", p.name, harness.Describe(got))
		}
	}
	for _, p := range pods {
		t.Run(p.name, func(t *testing.T) {
			d := d.In(t)
			if err := os.Remove(filepath.Join(p.www, "healthz")); err != nil {
				t.Fatal(err)
			}
			// Due after 0 + 1 s × 2 + 2 s; the wait is on the restart,
			// not on its timing, which a busy machine stretches.
			got := d.WaitPod(p.name, time.Minute, p.name+" restarted", func(p *v1.Pod) bool {
				cs := containerOf(p, "web")
				return cs.RestartCount >= 1 && cs.State.Running != nil
			})
			// Healthy again, so that it restarts only once.
			if err := os.WriteFile(filepath.Join(p.www, "healthz"), []byte("ok\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cs := containerOf(got, "web")
			if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil {
				t.Errorf("after the liveness failure: %s, last state %+v; want restartCount 1 after a termination", harness.Describe(got), cs.LastTerminationState)
			}
			if ev := eventsOf(d, p.name, "Unhealthy"); len(ev) == 0 || !strings.HasPrefix(ev[0].Message, "Liveness probe failed: ") {
				t.Errorf("Unhealthy events %+v, want Liveness probe failed", ev)
			}
			if ev := eventsOf(d, p.name, "Killing"); len(ev) != 1 || ev[0].Message != "Container web failed liveness probe, will be restarted" {
				t.Errorf("Killing events %+v, want one for the liveness failure", ev)
			}
		})
	}
	out, err := d.CLI("describe", "pod", pods[0].name)
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{"Liveness:", "http-get http://:", "Unhealthy", "Liveness probe failed", "failed liveness probe, will be restarted"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe pod lacks %q:\n%s", want, out)
		}
	}
}

const readiness = `apiVersion: v1
kind: Pod
metadata:
  name: ready
spec:
  containers:
  - name: web
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; httpd -f -p 8080 -h /www & wait"]
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: www, mountPath: /www}]
  volumes:
  - name: www
    hostPath: {path: WWW}
`

// TestReadinessFlips: readiness of a pod on its own network (the probe
// reaches it inside its namespace, or at its address) makes it Ready, not
// Ready and Ready again, restarting nothing.
func TestReadinessFlips(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	www := wwwDir(t)
	name := "ready-" + harness.TestNode
	e.Write("ready.yaml", strings.ReplaceAll(readiness, "WWW", www))
	got := d.WaitPod(name, 30*time.Second, "running", harness.Running)
	if podReady(got) || containerOf(got, "web").Ready {
		t.Errorf("ready before its readiness probe succeeded: %s", harness.Describe(got))
	}
	if err := os.WriteFile(filepath.Join(www, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.WaitPod(name, 10*time.Second, "Ready", func(p *v1.Pod) bool { return podReady(p) && containerOf(p, "web").Ready })
	if out, err := d.CLI("get", "pods"); err != nil || !strings.Contains(out, "1/1") {
		t.Errorf("get pods = %q, %v; want READY 1/1", out, err)
	}
	if err := os.Remove(filepath.Join(www, "ready")); err != nil {
		t.Fatal(err)
	}
	d.WaitPod(name, 10*time.Second, "not Ready", func(p *v1.Pod) bool { return !podReady(p) && !containerOf(p, "web").Ready })
	if out, err := d.CLI("get", "pods"); err != nil || !strings.Contains(out, "0/1") {
		t.Errorf("get pods = %q, %v; want READY 0/1", out, err)
	}
	if err := os.WriteFile(filepath.Join(www, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got = d.WaitPod(name, 10*time.Second, "Ready again", podReady)
	if cs := containerOf(got, "web"); cs.RestartCount != 0 {
		t.Errorf("readiness restarted the container: %s", harness.Describe(got))
	}
	if ev := eventsOf(d, name, "Unhealthy"); len(ev) == 0 || !strings.HasPrefix(ev[0].Message, "Readiness probe failed: ") {
		t.Errorf("Unhealthy events %+v, want Readiness probe failed", ev)
	}
}

const startup = `apiVersion: v1
kind: Pod
metadata:
  name: slow
spec:
  containers:
  - name: app
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    startupProbe:
      exec: {command: [cat, /m/started]}
      periodSeconds: 1
      failureThreshold: 60
    livenessProbe:
      exec: {command: [cat, /m/live]}
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: m, mountPath: /m}]
  volumes:
  - name: m
    hostPath: {path: DIR}
`

// TestStartupHoldsLiveness: a liveness probe that would fail at once does
// not run before the startup probe succeeded; the container is started
// and ready only then.
func TestStartupHoldsLiveness(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	dir := markDir(t)
	name := "slow-" + harness.TestNode
	e.Write("slow.yaml", strings.ReplaceAll(startup, "DIR", dir))
	d.WaitPod(name, 30*time.Second, "running", harness.Running)
	time.Sleep(4 * time.Second)
	got, err := d.Pod(name)
	if err != nil {
		t.Fatal(err)
	}
	cs := containerOf(got, "app")
	if cs.RestartCount != 0 || cs.Started == nil || *cs.Started || cs.Ready {
		t.Errorf("before startup succeeded: %s started %v; want no restart, not started, not ready", harness.Describe(got), cs.Started)
	}
	for _, f := range []string{"live", "started"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got = d.WaitPod(name, 10*time.Second, "started and ready", func(p *v1.Pod) bool {
		cs := containerOf(p, "app")
		return cs.Started != nil && *cs.Started && cs.Ready
	})
	if cs := containerOf(got, "app"); cs.RestartCount != 0 {
		t.Errorf("restarted: %s", harness.Describe(got))
	}
	// Liveness runs now: its failure restarts the container.
	if err := os.Remove(filepath.Join(dir, "live")); err != nil {
		t.Fatal(err)
	}
	d.WaitPod(name, 15*time.Second, "restarted by liveness", func(p *v1.Pod) bool { return containerOf(p, "app").RestartCount >= 1 })
}

const grpcProbed = `apiVersion: v1
kind: Pod
metadata:
  name: grpc
spec:
  hostNetwork: true
  containers:
  - name: server
    image: localhost/busybox:grpc
    command: [grpchealth, -addr, "127.0.0.1:PORT", -down, /m/down]
    livenessProbe:
      grpc: {port: PORT}
      periodSeconds: 1
    readinessProbe:
      grpc: {port: PORT, service: app}
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: m, mountPath: /m}]
  volumes:
  - name: m
    hostPath: {path: DIR}
`

// TestGRPCProbe: grpc probes against a grpc.health.v1 server built into
// the test image: the server as a whole keeps it alive, service "app"
// drives readiness.
func TestGRPCProbe(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "grpchealth")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/grpchealth")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gRPC health server: %v\n%s", err, out)
	}
	server, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	e := harness.NewEnv(t)
	e.Ctrd.ImportImageWith(t, harness.TestNS, testimage.Options{Ref: "localhost/busybox:grpc", Files: map[string][]byte{"bin/grpchealth": server}})
	d := e.Start()
	dir := markDir(t)
	name := "grpc-" + harness.TestNode
	e.Write("grpc.yaml", strings.NewReplacer("PORT", strconv.Itoa(harness.FreePort(t)), "DIR", dir).Replace(grpcProbed))
	d.WaitPod(name, 30*time.Second, "running and Ready", func(p *v1.Pod) bool { return harness.Running(p) && podReady(p) })
	if err := os.WriteFile(filepath.Join(dir, "down"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.WaitPod(name, 10*time.Second, "not Ready", func(p *v1.Pod) bool { return !podReady(p) })
	if err := os.Remove(filepath.Join(dir, "down")); err != nil {
		t.Fatal(err)
	}
	got := d.WaitPod(name, 10*time.Second, "Ready again", podReady)
	if cs := containerOf(got, "server"); cs.RestartCount != 0 {
		t.Errorf("restarted: %s", harness.Describe(got))
	}
	ev := eventsOf(d, name, "Unhealthy")
	if len(ev) == 0 || !strings.Contains(ev[0].Message, `Readiness probe failed: service unhealthy (responded with "NOT_SERVING")`) {
		t.Errorf("Unhealthy events %+v, want the readiness failure", ev)
	}
}
