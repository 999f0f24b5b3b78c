package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestRestartCommand: staticlet restart restarts a healthy pod's container
// (a new container, restartCount 1, an event describe shows), starts a
// crash-looping one at once instead of after its backoff, whose next
// failure then waits the initial delay, and refuses what must not run again.
func TestRestartCommand(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	crash := strings.NewReplacer("NAME", "crash", "POLICY", "Always", "CODE", "1").Replace(exiter)
	never := strings.NewReplacer("NAME", "never", "POLICY", "Never", "CODE", "1").Replace(exiter)
	e.Write("crash.yaml", crash)
	e.Write("never.yaml", never)
	e.Write("healthy.yaml", harness.BenchPod("healthy", "restart-test"))

	healthy := "healthy-" + harness.TestNode
	p := d.WaitPod(healthy, 60*time.Second, "healthy pod running", harness.Running)
	before := p.Status.ContainerStatuses[0].ContainerID
	out, err := d.CLI("restart", healthy)
	if err != nil || strings.TrimSpace(out) != "pod/"+healthy+" restarted" {
		t.Fatalf("restart %s = %q, %v; want pod/%s restarted", healthy, out, err, healthy)
	}
	p = d.WaitPod(healthy, 30*time.Second, "healthy pod restarted", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return harness.Running(p) && cs.ContainerID != before && cs.RestartCount == 1
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 0 {
		t.Errorf("lastState after the restart = %+v, want terminated with the TERM trap's exit 0", last)
	}
	out, err = d.CLI("describe", "pod", healthy)
	if err != nil || !strings.Contains(out, "restart requested through staticlet restart") {
		t.Errorf("describe pod %s = %v, want the restart's event:\n%s", healthy, err, out)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"restart", "never-" + harness.TestNode}, "restartPolicy is Never"},
		{[]string{"restart", healthy, "-c", "nope"}, `container "nope" not found`},
		{[]string{"restart", "nope"}, `pod "nope" not found`},
	} {
		out, err := d.CLI(tt.args...)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s = %q, %v; want an error with %q", strings.Join(tt.args, " "), out, err, tt.want)
		}
	}

	// Six restarts of a container that exits at once: staticlet's backoff
	// (1 s doubling) is then 32 s.
	name := "crash-" + harness.TestNode
	p = d.WaitPod(name, 90*time.Second, "crash pod in CrashLoopBackOff after 6 restarts", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 6 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil {
		t.Fatalf("crash pod = %s, want a last termination", harness.Describe(p))
	}
	backoffEnds := last.FinishedAt.Add(32 * time.Second)
	out, err = d.CLI("restart", name, "-c", "main")
	if err != nil || strings.TrimSpace(out) != "pod/"+name+" container main restarted" {
		t.Fatalf("restart %s -c main = %q, %v; want pod/%s container main restarted", name, out, err, name)
	}
	// Started at once: well before its backoff would have ended; and its
	// next failure waited 1 s again, not 64 s.
	p = d.WaitPod(name, 15*time.Second, "crash pod restarted twice after staticlet restart", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 8
	})
	cs := p.Status.ContainerStatuses[0]
	var started time.Time
	switch {
	case cs.State.Running != nil:
		started = cs.State.Running.StartedAt.Time
	case cs.State.Terminated != nil:
		started = cs.State.Terminated.StartedAt.Time
	case cs.LastTerminationState.Terminated != nil:
		started = cs.LastTerminationState.Terminated.StartedAt.Time
	}
	if started.IsZero() || !started.Before(backoffEnds) {
		t.Errorf("crash pod's container started at %v, want before its backoff would have ended, %v (%s)", started, backoffEnds, harness.Describe(p))
	}
}
