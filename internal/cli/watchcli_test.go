package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// runCLI runs the client command args in-process against w's socket
// until ctx ends it or it returns.
func (w *waitWorld) runCLI(ctx context.Context, out *harness.SyncBuffer, args ...string) error {
	cmd := rootCommand()
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs(append(args, "--status-socket", w.socket))
	return cmd.ExecuteContext(ctx)
}

// labelPod records pod name-node in namespace ns with the label app=app.
func (w *waitWorld) labelPod(ns, name, app string, phase v1.PodPhase) {
	// One change: a watcher must never see the pod without its label
	// (for a selecting watch, deleted, then added again).
	p := testPod(ns, name, phase, false)
	p.Labels = map[string]string{"app": app}
	w.store.SetPod(p)
}

// TestWatchCLIGetEvents: get events filters by -n and --for (a manifest's
// name too), prints oldest first, and -o json the events themselves.
func TestWatchCLIGetEvents(t *testing.T) {
	w := newWaitWorld(t)
	w.serve()
	w.setPod("a", "x", v1.PodRunning, true)
	now := time.Now()
	w.store.Event(pod.Event{Time: now.Add(-time.Minute), Pod: "a/x-node", Type: pod.EventNormal, Reason: "Started", Message: "Started container c"})
	w.store.Event(pod.Event{Time: now, Pod: "b/y-node", Type: pod.EventWarning, Reason: "BackOff", Message: "Back-off"})
	w.store.Event(pod.Event{Time: now, Pod: "a/x-node", Type: pod.EventNormal, Reason: "Killing", Message: "Stopping container c"})
	tests := []struct {
		args []string
		want []string // the reasons, in order
	}{
		{[]string{"get", "events"}, []string{"Started", "BackOff", "Killing"}},
		{[]string{"get", "events", "-n", "b"}, []string{"BackOff"}},
		{[]string{"get", "events", "--for", "pod/x"}, []string{"Started", "Killing"}},
		{[]string{"get", "ev", "--for", "pod/y-node"}, []string{"BackOff"}},
	}
	for _, tt := range tests {
		var out harness.SyncBuffer
		if err := w.runCLI(context.Background(), &out, tt.args...); err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var got []string
		for _, l := range lines[1:] {
			got = append(got, strings.Fields(l)[2])
		}
		if !strings.HasPrefix(lines[0], "LAST SEEN") || strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%v printed\n%s\nwant the events %v", tt.args, out.String(), tt.want)
		}
	}

	var out harness.SyncBuffer
	if err := w.runCLI(context.Background(), &out, "get", "events", "-n", "a", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	var events []pod.Event
	if err := json.Unmarshal([]byte(out.String()), &events); err != nil || len(events) != 2 || events[1].Reason != "Killing" {
		t.Errorf("get events -o json printed\n%s\nwant a's two events (%v)", out.String(), err)
	}
	if err := w.runCLI(context.Background(), &out, "get", "events", "--for", "node/x"); err == nil {
		t.Error("get events --for node/x succeeded, want an error")
	}
}

// TestWatchCLIGetPods: get pods -l selects by label; -w prints the
// selected pods, then a row per change, until interrupted.
func TestWatchCLIGetPods(t *testing.T) {
	w := newWaitWorld(t)
	w.serve()
	w.labelPod("a", "x", "web", v1.PodPending)
	w.labelPod("a", "y", "db", v1.PodRunning)

	var out harness.SyncBuffer
	if err := w.runCLI(context.Background(), &out, "get", "pods", "-l", "app in (web)"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "x-node") || strings.Contains(got, "y-node") {
		t.Errorf("get pods -l 'app in (web)' printed\n%s\nwant x-node alone", got)
	}
	if err := w.runCLI(context.Background(), &out, "get", "pods", "-l", "app in web"); err == nil || !strings.Contains(err.Error(), "invalid selector") {
		t.Errorf("get pods -l 'app in web' = %v, want invalid selector", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watched harness.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- w.runCLI(ctx, &watched, "get", "pods", "-w", "-l", "app=web") }()
	waitOutput := func(what string, cond func([]string) bool) {
		t.Helper()
		harness.WaitFor(t, 10*time.Second, what, func() (bool, string) {
			return cond(strings.Split(strings.TrimSpace(watched.String()), "\n")), watched.String()
		})
	}
	waitOutput("the header and x-node", func(l []string) bool {
		return len(l) == 2 && strings.HasPrefix(l[0], "NAME") && strings.Contains(l[1], "Pending")
	})
	w.labelPod("a", "y", "db", v1.PodFailed) // not selected
	w.labelPod("a", "x", "web", v1.PodRunning)
	waitOutput("a row for x-node Running", func(l []string) bool {
		return len(l) == 3 && strings.Fields(l[2])[0] == "x-node" && strings.Fields(l[2])[2] == "Running"
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("get pods -w after interrupt = %v, want nil", err)
	}
}
