package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/logindtest"
)

// shutdownPod is a pod NAME, in priority class CLASS, whose container
// appends "NAME <seconds since boot>" to /m/order when it gets SIGTERM; PRESTOP is its
// lifecycle, if any. It shares the host's network and IPC namespaces, so
// a staticlet in a machine can run it too.
const shutdownPod = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: true
  hostIPC: true
  priorityClassName: CLASS
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "trap 'read up rest < /proc/uptime; echo NAME $up >> /m/order; exit 0' TERM; : > /tmp/trapped; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: m, mountPath: /m}]
PRESTOP  volumes:
  - name: m
    hostPath: {path: DIR}
`

// shutdownEnv runs staticlet with a 40s shutdown grace period (10s for
// critical pods) against a fake logind, with the shutdownPods writing to
// dir, web's preStop hook taking preStop seconds.
func shutdownEnv(t *testing.T, preStop int) (e *env, d *daemon, logind *logindtest.Logind, dir string) {
	t.Helper()
	logind = logindtest.Start(t, logindtest.Config{InhibitDelayMax: time.Minute})
	e = newEnv(t)
	e.extraEnv = append(e.extraEnv, "DBUS_SYSTEM_BUS_ADDRESS="+logind.Address)
	d = e.start("--shutdown-grace-period", "40s", "--shutdown-grace-period-critical-pods", "10s")
	dir = markDir(t)
	for name, manifest := range shutdownPods(dir, preStop) {
		e.write(name, manifest)
	}
	e.waitTrapped(d.waitPod("web-"+testNode, 30*time.Second, "web running", running))
	e.waitTrapped(d.waitPod("etcd-"+testNode, 30*time.Second, "etcd running", running))
	waitFor(t, 30*time.Second, "the inhibitor lock held", func() (bool, string) {
		locks := logind.Locks()
		return len(locks) == 1 && locks[0].Taken(), "no lock taken"
	})
	return e, d, logind, dir
}

// shutdownPods are the manifests, by file name, of two pods writing their
// SIGTERM lines to dir's "order": web, a regular pod whose preStop hook
// takes preStop seconds, and etcd, a system-node-critical one.
func shutdownPods(dir string, preStop int) map[string]string {
	pod := func(name, class, lifecycle string) string {
		return strings.NewReplacer("NAME", name, "CLASS", class, "DIR", dir, "PRESTOP", lifecycle).Replace(shutdownPod)
	}
	return map[string]string{
		"web.yaml":  pod("web", "", fmt.Sprintf("    lifecycle:\n      preStop:\n        exec: {command: [sh, -c, 'sleep %d']}\n", preStop)),
		"etcd.yaml": pod("etcd", "system-node-critical", ""),
	}
}

// wantNoTaskRunning checks no container of e's containerd has a running
// task.
func (e *env) wantNoTaskRunning(t *testing.T) {
	t.Helper()
	ctx := nsCtx(context.Background())
	for _, c := range e.containers(ctx) {
		task, err := c.Task(ctx, nil)
		if err != nil {
			continue // never started, or gone
		}
		if st, err := task.Status(ctx); err == nil && st.Status == client.Running {
			t.Errorf("container %s still runs after the node shutdown", c.ID())
		}
	}
}

// terminatedByShutdown tells whether p reports the node shutdown's status.
func terminatedByShutdown(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Terminated" &&
		p.Status.Message == "Pod was terminated in response to imminent node shutdown." &&
		p.Status.ContainerStatuses[0].State.Terminated != nil
}

// wantShutdownOrder checks web's SIGTERM line precedes etcd's.
func wantShutdownOrder(t *testing.T, dir string) {
	t.Helper()
	order := markers(t, dir, "order", 2)
	if len(order) != 2 || !strings.HasPrefix(order[0], "web_") || !strings.HasPrefix(order[1], "etcd_") {
		t.Errorf("SIGTERM order %v, want web's line, then etcd's", order)
	}
	t.Logf("SIGTERM lines (name_uptime): %v", order)
}

// TestNodeShutdown: with --shutdown-grace-period, staticlet holds logind's
// delay inhibitor lock (a fake logind on a private bus here); when logind
// announces the shutdown, the regular pod is stopped, preStop hook and
// all, before the critical one; both report the node shutdown's status,
// systemd is told, and the lock is released after the pods are stopped.
func TestNodeShutdown(t *testing.T) {
	// The regular pod's preStop hook takes 2s: a critical pod stopped
	// alongside it would write its line first.
	e, d, logind, dir := shutdownEnv(t, 2)
	lock := logind.Locks()[0]
	if lock.What != "shutdown" || lock.Who != "staticlet" || lock.Mode != "delay" {
		t.Errorf("lock = %+v, want a delay lock on shutdown by staticlet", *lock)
	}

	logind.PrepareForShutdown(t, true)
	d.waitPod("web-"+testNode, 60*time.Second, "web terminated by the node shutdown", terminatedByShutdown)
	d.waitPod("etcd-"+testNode, 60*time.Second, "etcd terminated by the node shutdown", terminatedByShutdown)
	wantShutdownOrder(t, dir)
	waitFor(t, 30*time.Second, "the lock's release", func() (bool, string) { return lock.Released(), "still held" })
	e.wantNoTaskRunning(t)
	if _, ok := d.notify.has("STATUS=shutting down: stopping 2 pods"); !ok {
		t.Errorf("NOTIFY_SOCKET got %q, want a STATUS saying the pods are being stopped", d.notify.lines())
	}
	waitFor(t, 10*time.Second, "STATUS after the shutdown", func() (bool, string) {
		_, ok := d.notify.has("STATUS=shut down: pods stopped; 2 pods: 0 running, 2 failed")
		return ok, strings.Join(d.notify.lines(), " | ")
	})
	if out, _ := d.cli("get", "pods"); strings.Contains(out, "Running") {
		t.Errorf("get pods after the shutdown =\n%s\nwant no pod running", out)
	}
	d.stop()
}

// TestNodeShutdownOutlastsSIGTERM: staticlet told to stop (as systemd
// stops it during the shutdown) while it stops the pods finishes the job,
// critical pod included, before it exits.
func TestNodeShutdownOutlastsSIGTERM(t *testing.T) {
	_, d, logind, dir := shutdownEnv(t, 5)
	logind.PrepareForShutdown(t, true)
	waitFor(t, 30*time.Second, "the shutdown under way", func() (bool, string) {
		_, ok := d.notify.has("STATUS=shutting down")
		return ok, strings.Join(d.notify.lines(), " | ")
	})
	d.stop() // SIGTERM during web's 5s preStop hook
	wantShutdownOrder(t, dir)
	waitFor(t, 10*time.Second, "the lock's release", func() (bool, string) { return logind.Locks()[0].Released(), "still held" })
}
