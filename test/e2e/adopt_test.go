package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/podnet/netns"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestAdoptionAfterKill kills staticlet with three pods running and checks
// that a new staticlet adopts them: same processes, same restart counts.
func TestAdoptionAfterKill(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	names := []string{"one", "two", "three"}
	for i, n := range names {
		e.Write(n+".yaml", harness.SleeperPod(n, "x", i == 0))
	}
	before := podStates(t, e, d, names, "running")
	d.Kill()
	// As if staticlet had been killed while creating a sandbox: namespaces
	// pinned for a sandbox containerd never got.
	stray := filepath.Join(e.Root, "sandboxes", "0123456789abcdef0123456789abcdef")
	if err := netns.Create(netns.Spec{Dir: stray, Kinds: []netns.Kind{netns.Net, netns.IPC}}); err != nil {
		t.Fatal(err)
	}

	d2 := e.Start()
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("stray sandbox namespaces %s left after a restart (stat: %v)", stray, err)
		_ = netns.Remove(stray)
	}
	after := podStates(t, e, d2, names, "adopted")
	for _, n := range names {
		if after[n] != before[n] {
			t.Errorf("pod %s after restart = %+v, want %+v (unchanged)", n, after[n], before[n])
		}
	}
	wantNoStarts(t, d2)
	if n := len(e.Containers(t.Context())); n != 6 {
		t.Errorf("%d containers after restart, want 6 (3 sandboxes and 3 containers)", n)
	}
	// A graceful stop leaves the pods running too.
	d2.Stop()
	for n, s := range before {
		if !harness.ProcessRunning(s.pid) {
			t.Errorf("pod %s's process %d stopped with staticlet", n, s.pid)
		}
	}
	if _, ok := d2.Notify.Has("STOPPING=1"); !ok {
		t.Errorf("no STOPPING=1 on SIGTERM; got %q", d2.Notify.Lines())
	}
}

// podState is what adopting a pod leaves as it was: its container's ID,
// process, restart count and start.
type podState struct {
	id       string
	pid      int
	restarts int32
	started  string
}

// podStates waits until each pod of names (SleeperPod's names) runs
// under d, and returns the state of its container.
func podStates(t *testing.T, e *harness.Env, d *harness.Daemon, names []string, what string) map[string]podState {
	t.Helper()
	out := map[string]podState{}
	for _, n := range names {
		p := d.WaitPod(n+"-"+harness.TestNode, 30*time.Second, n+" "+what, harness.Running)
		cs := p.Status.ContainerStatuses[0]
		pid, err := e.PidOf(cs)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = podState{cs.ContainerID, pid, cs.RestartCount, cs.State.Running.StartedAt.String()}
	}
	return out
}

// wantNoStarts fails t when d's events tell of a container started or
// killed: after an adoption, nothing was.
func wantNoStarts(t *testing.T, d *harness.Daemon) {
	t.Helper()
	events, err := d.Client().Events(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Reason == "Started" || ev.Reason == "Killing" {
			t.Errorf("event after the restart: %s %s: %s", ev.Pod, ev.Reason, ev.Message)
		}
	}
}
