package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/client"
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

// ShutdownPods are the manifests, by file name, of two pods writing their
// SIGTERM lines to dir's "order": web, a regular pod whose preStop hook
// takes preStop seconds, and etcd, a system-node-critical one.
func ShutdownPods(dir string, preStop int) map[string]string {
	pod := func(name, class, lifecycle string) string {
		return strings.NewReplacer("NAME", name, "CLASS", class, "DIR", dir, "PRESTOP", lifecycle).Replace(shutdownPod)
	}
	return map[string]string{
		"web.yaml":  pod("web", "", fmt.Sprintf("    lifecycle:\n      preStop:\n        exec: {command: [sh, -c, 'sleep %d']}\n", preStop)),
		"etcd.yaml": pod("etcd", "system-node-critical", ""),
	}
}

// WantNoTaskRunning checks no container of e's containerd has a running
// task.
func (e *Env) WantNoTaskRunning(t *testing.T) {
	t.Helper()
	ctx := NSCtx(context.Background())
	for _, c := range e.Containers(ctx) {
		task, err := c.Task(ctx, nil)
		if err != nil {
			continue // never started, or gone
		}
		if st, err := task.Status(ctx); err == nil && st.Status == client.Running {
			t.Errorf("container %s still runs after the node shutdown", c.ID())
		}
	}
}

// WantShutdownOrder checks web's SIGTERM line precedes etcd's.
func WantShutdownOrder(t *testing.T, dir string) {
	t.Helper()
	order := Markers(t, dir, "order", 2)
	if len(order) != 2 || !strings.HasPrefix(order[0], "web_") || !strings.HasPrefix(order[1], "etcd_") {
		t.Errorf("SIGTERM order %v, want web's line, then etcd's", order)
	}
	t.Logf("SIGTERM lines (name_uptime): %v", order)
}
