package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// markDir makes a directory the test's pods write their markers to through
// a hostPath volume, world-writable for any user in the pod.
func markDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitGone waits until pod name is no longer reported.
func waitGone(d *harness.Daemon, name string) {
	d.T.Helper()
	harness.WaitFor(d.T, 60*time.Second, name+" gone", func() (bool, string) {
		_, err := d.Pod(name)
		return err != nil, "still listed"
	})
}

const hooked = `apiVersion: v1
kind: Pod
metadata:
  name: hooked
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "trap 'echo term-$(date +%s) >> /m/log; exit 0' TERM; while [ ! -f /tmp/poststart ]; do sleep 0.1; done; echo saw-$(cat /tmp/poststart) >> /m/log; while true; do sleep 1 & wait $!; done"]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, "echo poststart > /tmp/poststart"]}
      preStop:
        exec: {command: [sh, -c, "sleep 2; echo prestop-$(date +%s) >> /m/log"]}
    volumeMounts: [{name: m, mountPath: /m}]
  volumes:
  - name: m
    hostPath: {path: DIR}
`

// TestLifecycleHooks: the postStart hook runs as the container starts (the
// container sees its file); the preStop hook runs and finishes before the
// container gets SIGTERM, although it takes two seconds.
func TestLifecycleHooks(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	dir := markDir(t)
	e.Write("hooked.yaml", strings.ReplaceAll(hooked, "DIR", dir))
	d.WaitPod("hooked-"+harness.TestNode, 30*time.Second, "hooked running", harness.Running)
	if got := harness.Markers(t, dir, "log", 1); got[0] != "saw-poststart" {
		t.Errorf("first marker %q, want saw-poststart: the container saw the postStart hook's file", got[0])
	}

	e.Remove("hooked.yaml")
	waitGone(d, "hooked-"+harness.TestNode)
	got := harness.Markers(t, dir, "log", 3)
	if len(got) != 3 || !strings.HasPrefix(got[1], "prestop-") || !strings.HasPrefix(got[2], "term-") {
		t.Fatalf("markers %v, want saw-poststart, prestop-<time>, term-<time>: preStop before SIGTERM", got)
	}
	pre, _ := strconv.Atoi(strings.TrimPrefix(got[1], "prestop-"))
	term, _ := strconv.Atoi(strings.TrimPrefix(got[2], "term-"))
	if term < pre {
		t.Errorf("SIGTERM trap ran at %d, before the preStop hook's end at %d", term, pre)
	}
}

const failingPostStart = `apiVersion: v1
kind: Pod
metadata:
  name: badhook
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, "echo hook failed here; exit 1"]}
`

// TestFailedPostStartHook: a postStart hook that fails is a Warning event
// with the hook's output, and the container is killed and restarted.
func TestFailedPostStartHook(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("badhook.yaml", failingPostStart)
	d.WaitPod("badhook-"+harness.TestNode, 30*time.Second, "main restarted", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	events, err := d.Client().Events(t.Context(), "default/badhook-"+harness.TestNode)
	if err != nil {
		t.Fatal(err)
	}
	var failed, started int
	for _, ev := range events {
		switch ev.Reason {
		case "FailedPostStartHook":
			failed++
			if ev.Type != "Warning" || ev.Container != "main" || !strings.Contains(ev.Message, "hook failed here") || !strings.Contains(ev.Message, "exited with 1") {
				t.Errorf("FailedPostStartHook event = %+v, want a Warning for main with the hook's output and exit code", ev)
			}
		case "Started":
			started++
		}
	}
	if failed == 0 || started < 2 {
		t.Errorf("%d FailedPostStartHook and %d Started events, want at least 1 and 2: %+v", failed, started, events)
	}
}

const httpHooked = `apiVersion: v1
kind: Pod
metadata:
  name: httphook
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  containers:
  - name: web
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; httpd -f -p 127.0.0.1:PORT -h /www & wait"]
    ports: [{name: web, containerPort: PORT}]
    lifecycle:
      preStop:
        httpGet: {path: /cgi-bin/hook, port: web}
    volumeMounts: [{name: www, mountPath: /www}, {name: m, mountPath: /m}]
  volumes:
  - name: www
    hostPath: {path: WWW}
  - name: m
    hostPath: {path: DIR}
`

// TestPreStopHTTPGet: a preStop httpGet of a hostNetwork pod reaches the
// pod's own server on 127.0.0.1, on a port named in the container.
func TestPreStopHTTPGet(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	dir, www := markDir(t), markDir(t)
	if err := os.MkdirAll(filepath.Join(www, "cgi-bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	cgi := "#!/bin/sh\necho \"$REQUEST_METHOD-$HTTP_USER_AGENT\" >> /m/cgi\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n"
	if err := os.WriteFile(filepath.Join(www, "cgi-bin", "hook"), []byte(cgi), 0o755); err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	e.Write("httphook.yaml", strings.NewReplacer("PORT", strconv.Itoa(port), "WWW", www, "DIR", dir).Replace(httpHooked))
	d.WaitPod("httphook-"+harness.TestNode, 30*time.Second, "httphook running", harness.Running)
	harness.WaitFor(t, 10*time.Second, "httpd listening", func() (bool, string) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err == nil, fmt.Sprint(err)
	})
	e.Remove("httphook.yaml")
	waitGone(d, "httphook-"+harness.TestNode)
	got := harness.Markers(t, dir, "cgi", 1)
	if !strings.HasPrefix(got[0], "GET-kube-lifecycle") {
		t.Errorf("hook request %q, want a GET from kube-lifecycle", got[0])
	}
	events, err := d.Client().Events(t.Context(), "default/httphook-"+harness.TestNode)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Reason == "FailedPreStopHook" {
			t.Errorf("event %+v, want the hook to succeed", ev)
		}
	}
}

const slowPreStop = `apiVersion: v1
kind: Pod
metadata:
  name: slowstop
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "trap '' TERM; while true; do sleep 1 & wait $!; done"]
    lifecycle:
      preStop:
        exec: {command: [sleep, "600"]}
`

// TestPreStopBoundedByGrace: a preStop hook that would outlast the grace
// period (an exec hook: a sleep hook longer than the grace period does not
// pass validation) is cut off, and the container is killed soon after: the grace
// bounds the hook and the stop signal together (plus the kubelet's 2s
// minimum for the signal).
func TestPreStopBoundedByGrace(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("slowstop.yaml", slowPreStop)
	d.WaitPod("slowstop-"+harness.TestNode, 30*time.Second, "slowstop running", harness.Running)
	start := time.Now()
	e.Remove("slowstop.yaml")
	waitGone(d, "slowstop-"+harness.TestNode)
	if elapsed := time.Since(start); elapsed < 3*time.Second || elapsed > 20*time.Second {
		t.Errorf("pod gone %s after its removal, want between its 3s grace and 20s", elapsed)
	}
}

const signalled = `apiVersion: v1
kind: Pod
metadata:
  name: signalled
spec:
  os: {name: linux}
  terminationGracePeriodSeconds: 20
  containers:
  - name: image
    image: localhost/busybox:usr1
    command: [sh, -c, "for s in TERM USR1 USR2; do trap \"echo image-$s >> /m/signals; exit 0\" $s; done; : > /tmp/trapped; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: m, mountPath: /m}]
  - name: field
    image: localhost/busybox:test
    command: [sh, -c, "for s in TERM USR1 USR2; do trap \"echo field-$s >> /m/signals; exit 0\" $s; done; : > /tmp/trapped; while true; do sleep 1 & wait $!; done"]
    lifecycle: {stopSignal: SIGUSR2}
    volumeMounts: [{name: m, mountPath: /m}]
  volumes:
  - name: m
    hostPath: {path: DIR}
`

// TestStopSignals: a container is stopped with its image's STOPSIGNAL, or
// with lifecycle.stopSignal, instead of SIGTERM.
func TestStopSignals(t *testing.T) {
	e := harness.NewEnv(t)
	e.Ctrd.ImportImageWith(t, harness.TestNS, testimage.Options{Ref: "localhost/busybox:usr1", StopSignal: "SIGUSR1"})
	d := e.Start()
	dir := markDir(t)
	e.Write("signalled.yaml", strings.ReplaceAll(signalled, "DIR", dir))
	p := d.WaitPod("signalled-"+harness.TestNode, 30*time.Second, "signalled running", harness.Running)
	e.WaitTrapped(p)
	e.Remove("signalled.yaml")
	waitGone(d, "signalled-"+harness.TestNode)
	got := harness.Markers(t, dir, "signals", 2)
	if strings.Join(got, " ") != "field-USR2 image-USR1" && strings.Join(got, " ") != "image-USR1 field-USR2" {
		t.Errorf("signals received %v, want image-USR1 (its STOPSIGNAL) and field-USR2 (lifecycle.stopSignal)", got)
	}
}
