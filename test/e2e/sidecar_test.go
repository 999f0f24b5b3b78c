package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const withSidecar = `apiVersion: v1
kind: Pod
metadata:
  name: sidecar
spec:
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: proxy
    image: localhost/busybox:test
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; echo up > /shared/proxy; while true; do sleep 1; done"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  - name: setup
    image: localhost/busybox:test
    command: ["sh", "-c", "test -f /shared/proxy && echo ready > /shared/setup"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; cat /shared/setup; while true; do sleep 1; done"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  volumes:
  - name: shared
    emptyDir: {}
`

// TestSidecar runs a pod with a restartable init container: it starts
// before the next init container (which sees its work), keeps running
// beside the app, and is stopped after the app when the pod goes.
func TestSidecar(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("sidecar.yaml", withSidecar)
	p := d.WaitPod("sidecar-"+harness.TestNode, 30*time.Second, "app and sidecar running", func(p *v1.Pod) bool {
		return harness.Running(p) && len(p.Status.InitContainerStatuses) == 2 && p.Status.InitContainerStatuses[0].State.Running != nil
	})
	if s := p.Status.InitContainerStatuses[1].State.Terminated; s == nil || s.ExitCode != 0 {
		t.Errorf("setup init container = %+v, want completed (it needs the sidecar's file)", p.Status.InitContainerStatuses[1].State)
	}
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running", p.Status.Phase)
	}
	sidecarPid, err := e.PidOf(p.Status.InitContainerStatuses[0])
	if err != nil || !harness.ProcessRunning(sidecarPid) {
		t.Fatalf("sidecar process %d: %v", sidecarPid, err)
	}

	e.Remove("sidecar.yaml")
	harness.WaitFor(t, 30*time.Second, "pod gone", func() (bool, string) {
		_, err := d.Pod("sidecar-" + harness.TestNode)
		return err != nil, "still listed"
	})
	events, err := d.Client().Events(t.Context(), "default/sidecar-"+harness.TestNode)
	if err != nil {
		t.Fatal(err)
	}
	var stops []string
	for _, ev := range events {
		if ev.Reason == "Killing" && ev.Container != "" {
			stops = append(stops, ev.Container)
		}
	}
	if strings.Join(stops, ",") != "app,proxy" {
		t.Errorf("containers stopped in order %v, want app then proxy", stops)
	}
}
