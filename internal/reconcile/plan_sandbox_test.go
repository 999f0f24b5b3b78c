package reconcile

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestDecideSandbox(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute, Reset: 10 * time.Minute}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := pod.Record{ID: "sb", State: pod.TaskRunning, Pinned: true}
	exited := func(pinned bool, ran time.Duration) pod.Record {
		return pod.Record{ID: "sb", State: pod.TaskExited, ExitCode: 137, Pinned: pinned,
			StartedAt: now.Add(-time.Second - ran), FinishedAt: now.Add(-time.Second)}
	}
	tests := []struct {
		name      string
		sb        pod.Record
		exists    bool
		terminal  bool
		sharesPID bool
		retry     sandboxRetry // before
		want      sandboxDecision
		failures  int // after
	}{
		{name: "none yet", want: sandboxDecision{step: sandboxCreate}},
		{name: "running", sb: running, exists: true, want: sandboxDecision{step: sandboxKeep}},
		{name: "exited, pod done", sb: exited(true, time.Minute), exists: true, terminal: true, want: sandboxDecision{step: sandboxKeep}},
		{name: "first exit, pinned: again in place at once", sb: exited(true, time.Minute), exists: true,
			want: sandboxDecision{step: sandboxRestart, exited: true}, failures: 1},
		{name: "first exit, shared PID: re-created at once", sb: exited(true, time.Minute), exists: true, sharesPID: true,
			want: sandboxDecision{step: sandboxReplace, exited: true}, failures: 1},
		{name: "first exit, not pinned: re-created at once", sb: exited(false, time.Minute), exists: true,
			want: sandboxDecision{step: sandboxReplace, exited: true}, failures: 1},
		{name: "third exit in a streak: waits 2s from the exit", sb: exited(true, time.Second), exists: true,
			retry: sandboxRetry{failures: 2, failedAt: now.Add(-time.Minute)},
			want:  sandboxDecision{step: sandboxWait, until: now.Add(time.Second), exited: true}, failures: 3},
		{name: "exit after running for Reset: a new streak", sb: exited(true, 10*time.Minute), exists: true,
			retry: sandboxRetry{failures: 6, failedAt: now.Add(-time.Hour)},
			want:  sandboxDecision{step: sandboxRestart, exited: true}, failures: 1},
		{name: "failure counted already (a start that failed), backoff over", sb: exited(true, 0), exists: true,
			retry: sandboxRetry{failures: 2, failedAt: now.Add(-time.Second), counted: true},
			want:  sandboxDecision{step: sandboxRestart}, failures: 2},
		{name: "failure counted already, backoff not over", sb: exited(true, 0), exists: true,
			retry: sandboxRetry{failures: 3, failedAt: now.Add(-time.Second), counted: true},
			want:  sandboxDecision{step: sandboxWait, until: now.Add(time.Second)}, failures: 3},
		{name: "created, never started", sb: pod.Record{ID: "sb", State: pod.TaskCreated, Pinned: true}, exists: true,
			want: sandboxDecision{step: sandboxRestart}, failures: 1},
		{name: "creation failed, backoff not over", retry: sandboxRetry{failures: 2, failedAt: now, counted: true},
			want: sandboxDecision{step: sandboxWait, until: now.Add(time.Second)}, failures: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.retry
			got := decideSandbox(tt.sb, tt.exists, tt.terminal, tt.sharesPID, b, &s, now)
			if got != tt.want || s.failures != tt.failures {
				t.Errorf("decideSandbox = %+v with %d failures, want %+v with %d", got, s.failures, tt.want, tt.failures)
			}
		})
	}
}

// sandboxStarts returns the times of the sandbox starts after mark that
// succeeded.
func (h *harness) sandboxStarts(mark int) []time.Time {
	var out []time.Time
	for _, c := range h.since(mark, "sbstart") {
		if c.err == nil {
			out = append(out, c.at)
		}
	}
	return out
}

// waitSandboxUp lets fake time pass until p's sandbox runs, and returns it.
func (h *harness) waitSandboxUp(p *pod.Pod, limit time.Duration) pod.Record {
	h.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if sb := h.rt.newest(h.t, p.Key(), ""); sb.State == pod.TaskRunning {
			return sb
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the sandbox of %s did not run again within %v of fake time", p.Key(), limit)
		}
		h.sleep(100 * time.Millisecond)
	}
}

// readyToStart returns p's PodReadyToStartContainers condition.
func readyToStart(t *testing.T, st *v1.Pod) v1.PodCondition {
	t.Helper()
	for _, c := range st.Status.Conditions {
		if c.Type == v1.PodReadyToStartContainers {
			return c
		}
	}
	t.Fatalf("no PodReadyToStartContainers condition in %+v", st.Status.Conditions)
	return v1.PodCondition{}
}

// TestRunSandboxKeepsExiting: a pause process that keeps exiting is
// started again in place, each time later (at once, then 1s, 2s, 4s, 8s
// after its exit), with its exit code and output told; the app container
// is never stopped nor restarted, and the status says why the sandbox is
// down while it waits.
func TestRunSandboxKeepsExiting(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a"}})
		h := newHarness(t, Config{})
		h.set(p)
		app := h.rt.newest(t, p.Key(), "a")
		m := h.mark()
		var delays []time.Duration
		for i := 0; i < 5; i++ {
			sb := h.waitSandboxUp(p, 10*time.Minute)
			exitAt := time.Now()
			starts := len(h.sandboxStarts(m))
			h.exit(sb.ID, 137)
			if i == 3 {
				// Waiting: the status says why.
				if c := readyToStart(t, h.status(p)); c.Status != v1.ConditionFalse || c.Reason != "BackOff" || !strings.Contains(c.Message, "exited with code 137") {
					t.Errorf("PodReadyToStartContainers while backing off = %+v, want False, BackOff, with the exit code", c)
				}
			}
			h.waitSandboxUp(p, 10*time.Minute)
			delays = append(delays, h.sandboxStarts(m)[starts].Sub(exitAt))
		}
		if want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}; !slices.Equal(delays, want) {
			t.Errorf("pause restarted %v after each exit, want %v", delays, want)
		}
		for _, c := range h.since(m) {
			if c.op != "sbstart" && c.op != "start" {
				t.Errorf("%s while the pause kept exiting, want only sandbox starts", c)
			}
		}
		if cur := h.rt.newest(t, p.Key(), "a"); cur.ID != app.ID || cur.State != pod.TaskRunning {
			t.Errorf("app container %+v, want %s running still", cur, app.ID)
		}
		if n := len(h.rt.records(p.Key())); n != 2 {
			t.Errorf("%d records, want the sandbox and the app", n)
		}
		exits := h.rep.eventsWith("SandboxExited")
		if len(exits) != 5 || exits[0].Type != pod.EventWarning || !strings.Contains(exits[0].Message, "exited with code 137") ||
			!strings.Contains(exits[0].Message, "containers keep running") {
			t.Errorf("SandboxExited events = %v, want 5 warnings with the exit code", exits)
		}
		if n := len(h.rep.eventsWith("SandboxStarted")); n != 5 {
			t.Errorf("%d SandboxStarted events, want 5", n)
		}
		if n := len(h.rep.eventsWith("BackOff")); n != 4 {
			t.Errorf("%d BackOff events, want 4 (one per wait)", n)
		}
		if len(h.rep.eventsWith("SandboxChanged")) != 0 || len(h.rep.eventsWith("Killing")) != 0 {
			t.Error("the pod was re-created or its container stopped")
		}
		st := h.status(p)
		if c := readyToStart(t, st); c.Status != v1.ConditionTrue || containerStatusOf(t, st, "a").RestartCount != 0 {
			t.Errorf("at the end: %+v, a's restarts %d; want the sandbox up, no restart", c, containerStatusOf(t, st, "a").RestartCount)
		}
	})
}

// TestRunSandboxStreakResets: a pause that ran for the backoff's Reset
// before it exited is started again at once, as the first time.
func TestRunSandboxStreakResets(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a"}})
		h := newHarness(t, Config{Backoff: Backoff{Initial: time.Second, Max: time.Minute, Reset: time.Hour}})
		h.set(p)
		m := h.mark()
		for i := 0; i < 3; i++ { // a streak: the next restart would wait 4s
			h.exit(h.waitSandboxUp(p, time.Minute).ID, 1)
		}
		sb := h.waitSandboxUp(p, time.Minute)
		h.sleep(time.Hour)
		exitAt := time.Now()
		h.exit(sb.ID, 1)
		h.waitSandboxUp(p, time.Minute)
		if starts := h.sandboxStarts(m); starts[len(starts)-1] != exitAt {
			t.Errorf("pause that ran an hour restarted %v after its exit, want at once", starts[len(starts)-1].Sub(exitAt))
		}
	})
}

// TestRunSandboxStartFails: a pause process that cannot start (it exits at
// once) is tried again with backoff, each failure told with the pause's
// exit code and output; the app containers, started before the sandbox,
// run on.
func TestRunSandboxStartFails(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}})
		h := newHarness(t, Config{})
		h.rt.setSandboxStartErr(errors.New("starting sandbox x: pause process 7 exited with code 3: boom"))
		h.set(p)
		apps := []pod.Record{h.rt.newest(t, p.Key(), "a"), h.rt.newest(t, p.Key(), "b")}
		h.sleep(time.Minute)
		failed := len(h.since(0, "sbstart"))
		// At once, then after 1s, 2s, 4s, 8s, 16s, 32s: 7 tries in a minute.
		if failed != 7 {
			t.Errorf("%d tries to start the sandbox in a minute, want 7", failed)
		}
		ev := h.rep.eventsWith("FailedCreatePodSandBox")
		if len(ev) != failed || !strings.Contains(ev[0].Message, "exited with code 3: boom") {
			t.Errorf("FailedCreatePodSandBox events = %v, want one per try with the exit code and output", ev)
		}
		for _, a := range apps {
			if cur := h.rt.newest(t, p.Key(), a.Name); cur.ID != a.ID || cur.State != pod.TaskRunning {
				t.Errorf("container %s = %+v, want %s running still", a.Name, cur, a.ID)
			}
		}
		if c := readyToStart(t, h.status(p)); c.Status != v1.ConditionFalse || c.Reason != "BackOff" || !strings.Contains(c.Message, "boom") {
			t.Errorf("PodReadyToStartContainers = %+v, want False, BackOff, with the output", c)
		}
		h.rt.setSandboxStartErr(nil)
		h.waitSandboxUp(p, 2*time.Minute)
		if n := len(h.since(0, "create")); n != 1 {
			t.Errorf("%d sandboxes created, want 1: it is started in place", n)
		}
	})
}

// TestRunSandboxSharedPIDBacksOff: with shareProcessNamespace the pause
// is the pod's PID 1, whose exit ends the pod's containers: the pod is
// re-created, at once the first time, after the backoff when it keeps
// dying.
func TestRunSandboxSharedPIDBacksOff(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a"}, sharePID: true})
		h := newHarness(t, Config{})
		h.set(p)
		var delays []time.Duration
		for i := 0; i < 3; i++ {
			sb := h.waitSandboxUp(p, time.Minute)
			// The kernel ends the app with its PID namespace's init.
			h.rt.exit(t, h.rt.newest(t, p.Key(), "a").ID, 137)
			exitAt := time.Now()
			m := h.mark()
			h.exit(sb.ID, 137)
			h.waitFor(time.Minute, "the pod re-created", func() bool { return len(h.since(m, "create")) > 0 })
			delays = append(delays, h.since(m, "create")[0].at.Sub(exitAt))
		}
		if want := []time.Duration{0, time.Second, 2 * time.Second}; !slices.Equal(delays, want) {
			t.Errorf("pod re-created %v after each exit of its pause, want %v", delays, want)
		}
		if n := len(h.rep.eventsWith("SandboxChanged")); n != 3 {
			t.Errorf("%d SandboxChanged events, want 3", n)
		}
		if ev := h.rep.eventsWith("SandboxExited"); len(ev) != 3 || !strings.Contains(ev[0].Message, "the pod will be re-created") {
			t.Errorf("SandboxExited events = %v, want 3 saying the pod is re-created", ev)
		}
	})
}

// TestRunSandboxWithoutPause: a sandbox the runtime makes without a pause
// process is up once made: the pod's containers start in it, nothing
// starts it, and its status says it is ready. When it is gone (the node
// restarted, taking the pod's processes), the pod is re-created in a new
// one, as a dead sandbox whose namespaces are not pinned is, and again no
// pause is started. A pod sharing its PID namespace still gets one.
func TestRunSandboxWithoutPause(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}})
		shared := mkPod(t, podSpec{name: "shared", apps: []string{"c"}, sharePID: true})
		h := newHarness(t, Config{})
		h.rt.mu.Lock()
		h.rt.noPause = true
		h.rt.mu.Unlock()
		m := h.mark()
		h.set(p, shared)
		sb := h.rt.newest(t, p.Key(), "")
		if !sb.NoPause || sb.State != pod.TaskRunning {
			t.Fatalf("sandbox = %+v, want one without a pause process, running", sb)
		}
		if got := h.since(m, "sbstart"); len(got) != 1 || got[0].pod != shared.Key() {
			t.Errorf("sandbox starts = %v, want only the shared-PID pod's", got)
		}
		st := h.status(p)
		if st.Status.Phase != v1.PodRunning || readyToStart(t, st).Status != v1.ConditionTrue {
			t.Errorf("phase %s, PodReadyToStartContainers %s; want Running, True", st.Status.Phase, readyToStart(t, st).Status)
		}

		m = h.mark()
		h.rt.reboot(t, sb.ID)
		h.sleep(time.Minute) // a resync finds it
		if ev := h.rep.eventsWith("SandboxChanged"); len(ev) != 1 {
			t.Errorf("SandboxChanged events = %v, want 1", ev)
		}
		if ev := h.rep.eventsWith("SandboxExited"); len(ev) != 0 {
			t.Errorf("SandboxExited events = %v, want none: no pause process exited", ev)
		}
		if ev := h.rep.eventsWith("SandboxGone"); len(ev) != 1 || !strings.Contains(ev[0].Message, "the node restarted") {
			t.Errorf("SandboxGone events = %v, want 1 telling why", ev)
		}
		now := h.rt.newest(t, p.Key(), "")
		if now.ID == sb.ID || !now.NoPause || now.State != pod.TaskRunning {
			t.Errorf("sandbox after the reboot = %+v, want a new one without a pause process, running", now)
		}
		if got := h.ops(m, "sbstart"); len(got) != 0 {
			t.Errorf("sandbox starts = %v, want none", got)
		}
		starts := h.ops(m, "start")
		slices.Sort(starts)
		if want := []string{"start app a#1", "start app b#1"}; !slices.Equal(starts, want) {
			t.Errorf("starts after the reboot = %v, want %v", starts, want)
		}
		if st := h.status(p); st.Status.Phase != v1.PodRunning || readyToStart(t, st).Status != v1.ConditionTrue {
			t.Errorf("phase %s, PodReadyToStartContainers %s; want Running, True", st.Status.Phase, readyToStart(t, st).Status)
		}
	})
}
