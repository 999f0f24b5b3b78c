package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/logindtest"
)

// shutdownEnv runs staticlet with a 40s shutdown grace period (10s for
// critical pods) against a fake logind, with the shutdownPods writing to
// dir, web's preStop hook taking preStop seconds.
func shutdownEnv(t *testing.T, preStop int) (e *harness.Env, d *harness.Daemon, logind *logindtest.Logind, dir string) {
	t.Helper()
	logind = logindtest.Start(t, logindtest.Config{InhibitDelayMax: time.Minute})
	e = harness.NewEnv(t)
	e.ExtraEnv = append(e.ExtraEnv, "DBUS_SYSTEM_BUS_ADDRESS="+logind.Address)
	d = e.Start("--shutdown-grace-period", "40s", "--shutdown-grace-period-critical-pods", "10s")
	dir = markDir(t)
	for name, manifest := range harness.ShutdownPods(dir, preStop) {
		e.Write(name, manifest)
	}
	e.WaitTrapped(d.WaitPod("web-"+harness.TestNode, 30*time.Second, "web running", harness.Running))
	e.WaitTrapped(d.WaitPod("etcd-"+harness.TestNode, 30*time.Second, "etcd running", harness.Running))
	harness.WaitFor(t, 30*time.Second, "the inhibitor lock held", func() (bool, string) {
		locks := logind.Locks()
		return len(locks) == 1 && locks[0].Taken(), "no lock taken"
	})
	return e, d, logind, dir
}

// terminatedByShutdown tells whether p reports the node shutdown's status.
func terminatedByShutdown(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Terminated" &&
		p.Status.Message == "Pod was terminated in response to imminent node shutdown." &&
		p.Status.ContainerStatuses[0].State.Terminated != nil
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
	d.WaitPod("web-"+harness.TestNode, 60*time.Second, "web terminated by the node shutdown", terminatedByShutdown)
	d.WaitPod("etcd-"+harness.TestNode, 60*time.Second, "etcd terminated by the node shutdown", terminatedByShutdown)
	harness.WantShutdownOrder(t, dir)
	harness.WaitFor(t, 30*time.Second, "the lock's release", func() (bool, string) { return lock.Released(), "still held" })
	e.WantNoTaskRunning(t)
	if _, ok := d.Notify.Has("STATUS=shutting down: stopping 2 pods"); !ok {
		t.Errorf("NOTIFY_SOCKET got %q, want a STATUS saying the pods are being stopped", d.Notify.Lines())
	}
	harness.WaitFor(t, 10*time.Second, "STATUS after the shutdown", func() (bool, string) {
		_, ok := d.Notify.Has("STATUS=shut down: pods stopped; 2 pods: 0 running, 2 failed")
		return ok, strings.Join(d.Notify.Lines(), " | ")
	})
	if out, _ := d.CLI("get", "pods"); strings.Contains(out, "Running") {
		t.Errorf("get pods after the shutdown =\n%s\nwant no pod running", out)
	}
	d.Stop()
}

// TestNodeShutdownOutlastsSIGTERM: staticlet told to stop (as systemd
// stops it during the shutdown) while it stops the pods finishes the job,
// critical pod included, before it exits.
func TestNodeShutdownOutlastsSIGTERM(t *testing.T) {
	_, d, logind, dir := shutdownEnv(t, 5)
	logind.PrepareForShutdown(t, true)
	harness.WaitFor(t, 30*time.Second, "the shutdown under way", func() (bool, string) {
		_, ok := d.Notify.Has("STATUS=shutting down")
		return ok, strings.Join(d.Notify.Lines(), " | ")
	})
	d.Stop() // SIGTERM during web's 5s preStop hook
	harness.WantShutdownOrder(t, dir)
	harness.WaitFor(t, 10*time.Second, "the lock's release", func() (bool, string) { return logind.Locks()[0].Released(), "still held" })
}
