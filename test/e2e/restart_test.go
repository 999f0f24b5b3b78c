package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const exiter = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: true
  restartPolicy: POLICY
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "exit CODE"]
`

// TestRestartPolicies checks each restart policy against a container that
// exits at once.
func TestRestartPolicies(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	pod := func(name, policy, code string) string {
		return strings.NewReplacer("NAME", name, "POLICY", policy, "CODE", code).Replace(exiter)
	}
	e.Write("always.yaml", pod("always", "Always", "1"))
	e.Write("onfailure.yaml", pod("onfailure", "OnFailure", "0"))
	e.Write("never.yaml", pod("never", "Never", "1"))

	d.WaitPod("onfailure-"+harness.TestNode, 30*time.Second, "OnFailure pod Succeeded", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded
	})
	p := d.WaitPod("never-"+harness.TestNode, 30*time.Second, "Never pod Failed", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if cs := p.Status.ContainerStatuses[0]; cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 1 || cs.RestartCount != 0 {
		t.Errorf("Never pod container = %s, want terminated with exit 1 and no restart", harness.Describe(p))
	}

	// Always: restarted with growing delays (immediate, 1s, 2s, 4s...).
	p = d.WaitPod("always-"+harness.TestNode, 30*time.Second, "Always pod restarted 3 times", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 3
	})
	cs := p.Status.ContainerStatuses[0]
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("Always pod lastState = %+v, want terminated with exit 1", cs.LastTerminationState)
	}
	events, err := d.Client().Events(t.Context(), "default/always-"+harness.TestNode)
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	backoffs := 0
	for _, ev := range events {
		switch ev.Reason {
		case "Started":
			starts = append(starts, ev.Time)
		case "BackOff":
			backoffs++
		}
	}
	if backoffs == 0 {
		t.Errorf("no BackOff event among %d events", len(events))
	}
	if len(starts) < 4 {
		t.Fatalf("got %d Started events, want at least 4", len(starts))
	}
	// Each wait at least as long as the one before, past the immediate first restart.
	for i := 3; i < len(starts); i++ {
		prev, cur := starts[i-1].Sub(starts[i-2]), starts[i].Sub(starts[i-1])
		if cur+200*time.Millisecond < prev {
			t.Errorf("restart %d came %s after the previous, sooner than the %s before it: delays must grow", i, cur, prev)
		}
	}
	out, _ := d.CLI("get", "pods")
	if !strings.Contains(out, "Completed") || !strings.Contains(out, "Error") {
		t.Errorf("get pods =\n%s\nwant Completed and Error statuses", out)
	}
}
