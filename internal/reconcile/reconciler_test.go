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

func TestRunStartsPod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}})
		h := newHarness(t, Config{})

		// Before the sources have been read, nothing is looked at.
		h.sleep(time.Minute)
		if calls := h.log.all(); len(calls) != 0 {
			t.Fatalf("calls before the first desired set = %v, want none", calls)
		}

		h.set(p)
		if got := h.ops(0, "list", "create"); !slices.Equal(got, []string{"list", "create sb-1"}) {
			t.Errorf("first calls = %v, want the adoption listing, then a sandbox", got)
		}
		got := h.ops(0, "start")
		slices.Sort(got)
		if want := []string{"start app a#0", "start app b#0"}; !slices.Equal(got, want) {
			t.Errorf("starts = %v, want %v", got, want)
		}
		for _, c := range h.since(0, "start") {
			if !strings.HasPrefix(c.id, c.name+"-") || h.rt.newest(t, p.Key(), c.name).SandboxID != "sb-1" {
				t.Errorf("container %s started as %s, not in sandbox sb-1", c.name, c.id)
			}
		}
		if n := h.rep.readyCount(); n != 1 {
			t.Errorf("SetReady called %d times, want 1", n)
		}
		st := h.status(p)
		if st.Status.Phase != v1.PodRunning || len(st.Status.ContainerStatuses) != 2 {
			t.Errorf("status = %s with %d containers, want Running with 2", st.Status.Phase, len(st.Status.ContainerStatuses))
		}
		for _, cs := range st.Status.ContainerStatuses {
			if !cs.Ready || cs.RestartCount != 0 || cs.State.Running == nil {
				t.Errorf("container %s: ready %v, restartCount %d, state %s; want ready, 0, running", cs.Name, cs.Ready, cs.RestartCount, stateString(cs.State))
			}
		}
		if n := len(h.rep.eventsWith("Started")); n != 2 {
			t.Errorf("%d Started events, want 2", n)
		}

		// The same set again, and resyncs: nothing more to do.
		m := h.mark()
		h.set(p)
		h.sleep(2 * time.Minute)
		h.wantOps(m)
		if n := h.rep.readyCount(); n != 1 {
			t.Errorf("SetReady called %d times after more sets, want 1", n)
		}
	})
}

func TestRunAdoptsRunningPod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}})
		h := newHarness(t, Config{}, runningRecs(p, "old", 3)...)
		h.set(p)
		h.sleep(time.Minute)
		h.wantOps(0)
		st := h.status(p)
		if st.Status.Phase != v1.PodRunning {
			t.Errorf("phase = %s, want Running", st.Status.Phase)
		}
		for _, cs := range st.Status.ContainerStatuses {
			if cs.RestartCount != 3 || cs.ContainerID != "containerd://old-"+cs.Name {
				t.Errorf("container %s: restartCount %d, id %s; want 3, containerd://old-%s", cs.Name, cs.RestartCount, cs.ContainerID, cs.Name)
			}
		}
		if n := h.rep.readyCount(); n != 1 {
			t.Errorf("SetReady called %d times, want 1", n)
		}
	})
}

// TestRunAdoptsHalfStartedContainer: staticlet died between creating a
// container and starting its task; the next one finishes starting that
// container, and only when it cannot, removes it and starts the same
// attempt anew.
func TestRunAdoptsHalfStartedContainer(t *testing.T) {
	for _, tt := range []struct {
		name      string
		resumeErr error
		want      []string
	}{
		{"resumed", nil, []string{"resume old-app"}},
		{"cannot be resumed", errors.New("the shim is gone"), []string{"resume old-app failed", "remove old-app", "start app app#2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				p := mkPod(t, podSpec{})
				recs := runningRecs(p, "old", 2)
				recs[1].State = pod.TaskCreated
				h := newHarness(t, Config{}, recs...)
				h.rt.resumeErr = tt.resumeErr
				h.set(p)
				h.wantOps(0, tt.want...)
				if cs := containerStatusOf(t, h.status(p), "app"); cs.State.Running == nil || cs.RestartCount != 2 {
					t.Errorf("app: %s, restartCount %d; want running, 2", stateString(cs.State), cs.RestartCount)
				}
			})
		})
	}
}

func TestRunRemovesOrphans(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{grace: 7})
		gone := mkPod(t, podSpec{name: "gone", apps: []string{"x", "z"}, grace: 7})
		h := newHarness(t, Config{}, runningRecs(gone, "old", 0)...)

		h.sleep(5 * time.Minute)
		if calls := h.log.all(); len(calls) != 0 {
			t.Fatalf("calls before the first desired set = %v, want none", calls)
		}

		h.set(p)
		orphan := func(c call) bool { return c.pod == gone.Key() }
		var got []string
		for _, c := range h.since(0) {
			if orphan(c) {
				got = append(got, c.String())
			}
		}
		// The containers stop in parallel, then the sandbox; with no
		// manifest there is no grace period but the default.
		want := []string{"remove old-x", "remove old-z", "stop old-x 30s", "stop old-z 30s", "stop old 2s", "remove old", "files kube-system/gone-n", "delete kube-system/gone-n"}
		// A late exit of a stopped container may make the reconciler look
		// at the gone pod once more and report its deletion again.
		for len(got) > len(want) && got[len(got)-1] == want[len(want)-1] {
			got = got[:len(got)-1]
		}
		sortedPrefix := slices.Clone(got)
		if len(sortedPrefix) >= 4 {
			slices.Sort(sortedPrefix[:4])
		}
		if !slices.Equal(sortedPrefix, want) {
			t.Errorf("calls for the orphan = %v, want %v (the first four in any order)", got, want)
		}
		if stops := h.since(0, "stop"); len(stops) >= 2 && stops[0].id == "old" {
			t.Errorf("sandbox stopped before its containers: %v", stops)
		}
		for _, c := range h.since(0, "files") {
			if c.pod == gone.Key() && c.id != string(gone.UID) {
				t.Errorf("RemovePodFiles(%s) with uid %q, want %q", c.pod, c.id, gone.UID)
			}
		}
		if len(h.rt.records(gone.Key())) != 0 {
			t.Errorf("orphan still has records %v", h.rt.records(gone.Key()))
		}
		if h.rep.pod(p.Key()) == nil || h.rep.pod(p.Key()).Status.Phase != v1.PodRunning {
			t.Errorf("the desired pod was not started beside the orphan's removal")
		}
		if len(h.rep.eventsWith("Killing")) == 0 {
			t.Errorf("no Killing event for the orphan")
		}
	})
}

// TestRunRemovesStrayOnExit: an exit of a container of a pod no worker
// owns, found after start, gets it cleaned up.
func TestRunRemovesStrayOnExit(t *testing.T) {
	bubble(t, func(t *testing.T) {
		stray := mkPod(t, podSpec{name: "stray"})
		h := newHarness(t, Config{})
		h.set()
		h.rt.seed(runningRecs(stray, "s", 0)...)
		m := h.mark()
		h.exit("s-app", 1)
		want := []string{"stop s-app 30s", "remove s-app", "stop s 2s", "remove s", "files kube-system/stray-n", "delete kube-system/stray-n"}
		if got := h.ops(m); !slices.Equal(got[:min(len(got), len(want))], want) {
			t.Errorf("calls = %v, want %v", got, want)
		}
	})
}

func TestRunContainerChange(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p1 := mkPod(t, podSpec{apps: []string{"a", "b"}, grace: 5})
		p2 := mkPod(t, podSpec{apps: []string{"a", "b"}, grace: 5, imageOf: map[string]string{"b": "busybox:1.37"}})
		if p1.SandboxHash != p2.SandboxHash {
			t.Fatalf("test pods differ in SandboxHash")
		}
		h := newHarness(t, Config{})
		h.set(p1)
		sb := h.rt.newest(t, p1.Key(), "")
		a := h.rt.newest(t, p1.Key(), "a")
		b := h.rt.newest(t, p1.Key(), "b")

		m := h.mark()
		h.set(p2)
		h.sleep(time.Minute)
		h.wantOps(m, "stop "+b.ID+" 5s", "remove "+b.ID, "start app b#1")
		if nb := h.rt.newest(t, p2.Key(), "b"); nb.SandboxID != sb.ID || nb.Hash != pod.ContainerHash(&p2.Spec.Containers[1]) {
			t.Errorf("new b in sandbox %s with hash %s, want %s and the new spec's", nb.SandboxID, nb.Hash, sb.ID)
		}
		if got := h.rt.newest(t, p2.Key(), "a"); got.ID != a.ID || got.State != pod.TaskRunning {
			t.Errorf("a is %s (%s), want %s untouched", got.ID, got.State, a.ID)
		}
		st := h.status(p2)
		if cs := containerStatusOf(t, st, "b"); cs.RestartCount != 1 || cs.State.Running == nil || cs.Image != "busybox:1.37" {
			t.Errorf("b: restartCount %d, %s, image %s; want 1, running, busybox:1.37", cs.RestartCount, stateString(cs.State), cs.Image)
		}
		if st.UID != p2.UID {
			t.Errorf("status is of UID %s, want the new manifest's %s", st.UID, p2.UID)
		}
		ev := h.rep.eventsWith("Killing")
		if len(ev) != 1 || ev[0].Container != "b" || !strings.Contains(ev[0].Message, "definition changed") {
			t.Errorf("Killing events = %+v, want one for b's changed definition", ev)
		}
	})
}

func TestRunPodChange(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p1 := mkPod(t, podSpec{apps: []string{"a", "b"}, grace: 5, label: "1"})
		p2 := mkPod(t, podSpec{apps: []string{"a", "b"}, grace: 9, label: "2"})
		if p1.SandboxHash == p2.SandboxHash {
			t.Fatalf("test pods have the same SandboxHash")
		}
		h := newHarness(t, Config{})
		h.set(p1)
		h.exit(h.rt.newest(t, p1.Key(), "a").ID, 1) // a restarts once: two records of a
		old := h.rt.records(p1.Key())

		m := h.mark()
		h.set(p2)
		calls := h.since(m)
		create := slices.IndexFunc(calls, func(c call) bool { return c.op == "create" })
		if create < 0 {
			t.Fatalf("no new sandbox: %v", calls)
		}
		// Every old container and sandbox is stopped and removed before the
		// new sandbox is made.
		for _, r := range old {
			stopped := slices.IndexFunc(calls, func(c call) bool { return c.op == "stop" && c.id == r.ID })
			removed := slices.IndexFunc(calls, func(c call) bool { return c.op == "remove" && c.id == r.ID })
			if removed < 0 || removed > create {
				t.Errorf("%s removed at %d, want before the new sandbox at %d", r.ID, removed, create)
			}
			if r.State == pod.TaskRunning && (stopped < 0 || stopped > removed) {
				t.Errorf("running %s stopped at %d, want before its removal at %d", r.ID, stopped, removed)
			}
			if stopped >= 0 && r.Kind != pod.KindSandbox && calls[stopped].grace != 5*time.Second {
				t.Errorf("%s stopped with grace %v, want the old spec's 5s", r.ID, calls[stopped].grace)
			}
		}
		sbStop := slices.IndexFunc(calls, func(c call) bool { return c.op == "stop" && c.kind == pod.KindSandbox })
		if sbStop < 0 {
			t.Fatalf("old sandbox not stopped: %v", calls)
		}
		for i, c := range calls {
			if i < sbStop && c.op == "start" {
				t.Errorf("a container started before the old sandbox stopped: %v", c)
			}
			if i > sbStop && c.op == "stop" && c.kind != pod.KindSandbox {
				t.Errorf("container %s stopped after the sandbox", c.id)
			}
		}
		starts := h.ops(m, "start")
		slices.Sort(starts)
		if want := []string{"start app a#0", "start app b#0"}; !slices.Equal(starts, want) {
			t.Errorf("starts = %v, want %v: a new spec counts restarts afresh", starts, want)
		}
		if n := len(h.rt.records(p2.Key())); n != 3 {
			t.Errorf("%d records after the change, want 3 (sandbox, a, b): %v", n, h.rt.records(p2.Key()))
		}
		if st := h.status(p2); st.Status.Phase != v1.PodRunning || st.Labels["v"] != "2" {
			t.Errorf("status %s with label v=%s, want Running with v=2", st.Status.Phase, st.Labels["v"])
		}
	})
}

func TestRunRemovesPod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}, grace: 7})
		h := newHarness(t, Config{})
		h.set(p)
		recs := h.rt.records(p.Key())
		sb := h.rt.newest(t, p.Key(), "")

		m := h.mark()
		h.set()
		calls := h.since(m)
		got := h.ops(m)
		want := []string{
			"remove a-2", "remove b-3", "stop a-2 7s", "stop b-3 7s", // in parallel: any order
			"stop " + sb.ID + " 2s", "remove " + sb.ID, "files kube-system/web-n", "delete kube-system/web-n",
		}
		if len(got) < len(want) {
			t.Fatalf("calls = %v, want %v", got, want)
		}
		head := slices.Clone(got[:4])
		slices.Sort(head)
		if !slices.Equal(append(head, got[4:len(want)]...), want) {
			t.Errorf("calls = %v, want %v (the first four in any order)", got, want)
		}
		for _, c := range calls[len(want):] {
			// A late exit of a stopped container may make the reconciler
			// look at the pod once more; it must find nothing to do.
			if c.op != "delete" {
				t.Errorf("call after the pod was deleted: %v", c)
			}
		}
		for _, c := range calls {
			if c.op == "files" && c.id != string(p.UID) {
				t.Errorf("RemovePodFiles with uid %q, want %q", c.id, p.UID)
			}
			if c.op == "stop" && c.kind == pod.KindApp {
				i := slices.IndexFunc(recs, func(r pod.Record) bool { return r.ID == c.id })
				if i < 0 {
					t.Errorf("stopped unknown %s", c.id)
				}
			}
		}
		if h.rep.pod(p.Key()) != nil {
			t.Errorf("status of %s still reported after removal", p.Key())
		}
		if len(h.rt.records(p.Key())) != 0 {
			t.Errorf("records left: %v", h.rt.records(p.Key()))
		}

		// Its worker is gone: resyncs do not look at the pod again.
		m = h.mark()
		h.sleep(time.Minute)
		h.wantOps(m)

		// And the pod can come back.
		h.set(p)
		if st := h.status(p); st.Status.Phase != v1.PodRunning {
			t.Errorf("re-added pod is %s, want Running", st.Status.Phase)
		}
	})
}

// TestRunRestartBackoff: under Always a crashing container restarts at
// once, then after 1s, 2s, 4s, ... up to Max, and at once again after a run
// of Reset.
func TestRunRestartBackoff(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		h := newHarness(t, Config{Backoff: Backoff{Initial: time.Second, Max: 8 * time.Second, Reset: 10 * time.Minute}})
		h.set(p)

		runFor := 3 * time.Second
		var delays []time.Duration
		for i := range 7 {
			cur := h.rt.newest(t, p.Key(), "app")
			if cur.Attempt != i || cur.State != pod.TaskRunning {
				t.Fatalf("before crash %d: app attempt %d %s, want %d running", i, cur.Attempt, cur.State, i)
			}
			h.sleep(runFor)
			m := h.mark()
			crashed := time.Now()
			h.exit(cur.ID, 1)
			if i > 0 {
				// While it waits, the status says why.
				st := h.status(p)
				cs := containerStatusOf(t, st, "app")
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" ||
					cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 || cs.RestartCount != int32(i) {
					t.Errorf("crash %d: app status %s (last %s), restartCount %d; want CrashLoopBackOff after exit 1, %d",
						i, stateString(cs.State), stateString(cs.LastTerminationState), cs.RestartCount, i)
				}
				if st.Status.Phase != v1.PodRunning || st.Status.Conditions[2].Status != v1.ConditionFalse {
					t.Errorf("crash %d: phase %s, ready %s; want Running, not ready", i, st.Status.Phase, st.Status.Conditions[2].Status)
				}
			}
			h.waitFor(time.Hour, "restart", func() bool { return len(h.since(m, "start")) > 0 })
			start := h.since(m, "start")[0]
			delays = append(delays, start.at.Sub(crashed))
			if start.attempt != i+1 {
				t.Errorf("restart %d with attempt %d, want %d", i, start.attempt, i+1)
			}
		}
		want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
		if !slices.Equal(delays, want) {
			t.Errorf("restart delays = %v, want %v", delays, want)
		}
		if cs := containerStatusOf(t, h.status(p), "app"); cs.RestartCount != 7 || cs.State.Running == nil {
			t.Errorf("after 7 restarts: app %s, restartCount %d; want running, 7", stateString(cs.State), cs.RestartCount)
		}
		if n := len(h.rep.eventsWith("BackOff")); n != 6 {
			t.Errorf("%d BackOff events, want one per delayed restart, 6", n)
		}
		// A run of Reset starts the backoff over.
		h.sleep(10 * time.Minute)
		// Only the newest two records of a name are kept, once a resync
		// has looked at the pod.
		if n := len(h.rt.records(p.Key())); n != 3 {
			t.Errorf("%d records kept, want 3: sandbox, current and previous", n)
		}
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "app").ID, 1)
		if got := h.ops(m, "start"); !slices.Equal(got, []string{"start app app#8"}) {
			t.Errorf("after a long run the restart is %v, want at once", got)
		}
	})
}

// TestRunRestartPolicies: what an exit leads to under each policy.
func TestRunRestartPolicies(t *testing.T) {
	tests := []struct {
		name      string
		policy    v1.RestartPolicy
		code      int32
		restarted bool
		phase     v1.PodPhase
		state     string // of the container, after the exit
	}{
		{"Always exit 0", v1.RestartPolicyAlways, 0, true, v1.PodRunning, "running"},
		{"Always exit 1", v1.RestartPolicyAlways, 1, true, v1.PodRunning, "running"},
		{"OnFailure exit 0", v1.RestartPolicyOnFailure, 0, false, v1.PodSucceeded, "terminated:0"},
		{"OnFailure exit 1", v1.RestartPolicyOnFailure, 1, true, v1.PodRunning, "running"},
		{"Never exit 0", v1.RestartPolicyNever, 0, false, v1.PodSucceeded, "terminated:0"},
		{"Never exit 1", v1.RestartPolicyNever, 1, false, v1.PodFailed, "terminated:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				p := mkPod(t, podSpec{policy: tt.policy})
				h := newHarness(t, Config{})
				h.set(p)
				sb := h.rt.newest(t, p.Key(), "")
				m := h.mark()
				h.exit(h.rt.newest(t, p.Key(), "app").ID, tt.code)
				h.sleep(2 * time.Minute) // resyncs: a finished pod stays finished
				want := []string{"start app app#1"}
				if !tt.restarted {
					// Nothing will run again: the sandbox goes, the
					// exited container stays for its status.
					want = []string{"stop " + sb.ID + " 2s"}
				}
				h.wantOps(m, want...)
				st := h.status(p)
				if st.Status.Phase != tt.phase {
					t.Errorf("phase = %s, want %s", st.Status.Phase, tt.phase)
				}
				if got := stateString(containerStatusOf(t, st, "app").State); got != tt.state {
					t.Errorf("app state = %s, want %s", got, tt.state)
				}
				if !tt.restarted {
					if c := st.Status.Conditions; c[0].Status != v1.ConditionFalse || c[2].Reason != "PodCompleted" {
						t.Errorf("conditions of a finished pod = %+v, want sandbox not ready and PodCompleted", c)
					}
				}
			})
		})
	}
}

func TestRunInitContainers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{inits: []string{"i1", "i2"}, apps: []string{"a", "b"}})
		h := newHarness(t, Config{})
		h.set(p)
		h.sleep(time.Minute)
		h.wantOps(0, "create sb-1", "start init i1#0")
		st := h.status(p)
		if st.Status.Phase != v1.PodPending || st.Status.Conditions[1].Status != v1.ConditionFalse {
			t.Errorf("while i1 runs: phase %s, initialized %s; want Pending, False", st.Status.Phase, st.Status.Conditions[1].Status)
		}

		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 0)
		h.sleep(time.Minute)
		h.wantOps(m, "start init i2#0")

		m = h.mark()
		h.exit(h.rt.newest(t, p.Key(), "i2").ID, 0)
		got := h.ops(m)
		slices.Sort(got)
		if want := []string{"start app a#0", "start app b#0"}; !slices.Equal(got, want) {
			t.Errorf("after the init containers: %v, want %v", got, want)
		}
		st = h.status(p)
		if st.Status.Phase != v1.PodRunning || st.Status.Conditions[1].Status != v1.ConditionTrue {
			t.Errorf("phase %s, initialized %s; want Running, True", st.Status.Phase, st.Status.Conditions[1].Status)
		}
		for _, name := range []string{"i1", "i2"} {
			if cs := containerStatusOf(t, st, name); stateString(cs.State) != "terminated:0" {
				t.Errorf("%s: %s, want terminated:0", name, stateString(cs.State))
			}
		}

		// App containers restarting do not run the init containers again.
		m = h.mark()
		h.exit(h.rt.newest(t, p.Key(), "a").ID, 1)
		h.wantOps(m, "start app a#1")
	})
}

func TestRunInitContainerRetriedUnderAlways(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{inits: []string{"i1"}})
		h := newHarness(t, Config{})
		h.set(p)
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 1)
		h.wantOps(m, "start init i1#1")
		m = h.mark()
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 1)
		h.wantOps(m)
		if cs := containerStatusOf(t, h.status(p), "i1"); stateString(cs.State) != "waiting:CrashLoopBackOff" {
			t.Errorf("i1: %s, want waiting:CrashLoopBackOff", stateString(cs.State))
		}
		h.sleep(time.Second)
		h.wantOps(m, "start init i1#2")
		first := h.rt.records(p.Key())[1]
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 0)
		// The oldest of three records of i1 is cleaned up.
		h.wantOps(m, "start init i1#2", "start app app#0", "stop "+first.ID+" 30s", "remove "+first.ID)
	})
}

func TestRunInitContainerFailsUnderNever(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{policy: v1.RestartPolicyNever, inits: []string{"i1", "i2"}})
		h := newHarness(t, Config{})
		h.set(p)
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 1)
		h.sleep(time.Minute)
		for _, c := range h.since(m, "start", "create") {
			t.Errorf("%v after an init container failed under Never", c)
		}
		st := h.status(p)
		if st.Status.Phase != v1.PodFailed {
			t.Errorf("phase = %s, want Failed", st.Status.Phase)
		}
		if cs := containerStatusOf(t, st, "i1"); stateString(cs.State) != "terminated:1" {
			t.Errorf("i1: %s, want terminated:1", stateString(cs.State))
		}
	})
}

// TestRunInitContainerFailsUnderNeverStopsSandbox: a pod that is Failed
// because an init container failed under Never runs nothing again, so its
// sandbox should go, as for a pod whose app containers finished.
func TestRunInitContainerFailsUnderNeverStopsSandbox(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{policy: v1.RestartPolicyNever, inits: []string{"i1"}})
		h := newHarness(t, Config{})
		h.set(p)
		sb := h.rt.newest(t, p.Key(), "")
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 1)
		h.sleep(time.Minute)
		h.wantOps(m, "stop "+sb.ID+" 2s")
	})
}

func TestRunErrImageNeverPull(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}})
		h := newHarness(t, Config{})
		msg := `container image "busybox:1.36" is not present with pull policy of Never`
		h.rt.setStartErr("b", &pod.WaitingError{Reason: "ErrImageNeverPull", Err: errors.New(msg)})
		h.set(p)

		st := h.status(p)
		cs := containerStatusOf(t, st, "b")
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "ErrImageNeverPull" || cs.State.Waiting.Message != msg {
			t.Errorf("b: %+v, want waiting ErrImageNeverPull with the error's message", cs.State)
		}
		if cs.RestartCount != 0 || st.Status.Phase != v1.PodPending {
			t.Errorf("b restartCount %d, phase %s; want 0 (not a crash), Pending", cs.RestartCount, st.Status.Phase)
		}
		if a := containerStatusOf(t, st, "a"); a.State.Running == nil {
			t.Errorf("a: %s, want running beside the failing b", stateString(a.State))
		}

		// Retried with backoff (after 1s, then 2s more), but said once.
		m := h.mark()
		h.sleep(5 * time.Second)
		if n := len(h.since(m, "start")); n != 2 {
			t.Errorf("%d retries in 5s, want 2 (at 1s and 3s)", n)
		}
		for _, c := range h.since(m, "start") {
			if c.String() != "start app b#0 failed" {
				t.Errorf("retry %v, want start app b#0 failed", c)
			}
		}
		ev := h.rep.eventsWith("Failed")
		if len(ev) != 1 || ev[0].Type != pod.EventWarning || ev[0].Message != msg || ev[0].Container != "b" {
			t.Errorf("Failed events = %+v, want one warning for b with the error", ev)
		}
		if n := len(h.rep.eventsWith("BackOff")); n != 0 {
			t.Errorf("%d BackOff events, want none: nothing crashed", n)
		}

		// Once the image is there, it starts.
		h.rt.setStartErr("b", nil)
		m = h.mark()
		h.sleep(4 * time.Second)
		h.wantOps(m, "start app b#0")
		st = h.status(p)
		if cs := containerStatusOf(t, st, "b"); cs.State.Running == nil || st.Status.Phase != v1.PodRunning {
			t.Errorf("b: %s, phase %s; want running, Running", stateString(cs.State), st.Status.Phase)
		}
	})
}

// TestRunSandboxDies: a sandbox whose namespaces are not pinned (made
// before staticlet pinned them) is re-created when its pause dies.
func TestRunSandboxDies(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{inits: []string{"i1"}, apps: []string{"a", "b"}})
		h := newHarness(t, Config{})
		h.rt.mu.Lock()
		h.rt.unpinned = true
		h.rt.mu.Unlock()
		h.set(p)
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 0)
		h.exit(h.rt.newest(t, p.Key(), "a").ID, 1) // a: attempt 1
		h.exit(h.rt.newest(t, p.Key(), "a").ID, 1)
		h.sleep(time.Second) // a: attempt 2
		old := h.rt.newest(t, p.Key(), "")
		oldRecs := h.rt.records(p.Key())

		m := h.mark()
		h.exit(old.ID, 137)
		calls := h.since(m)
		create := slices.IndexFunc(calls, func(c call) bool { return c.op == "create" })
		if create < 0 {
			t.Fatalf("no new sandbox after the old one died: %v", h.ops(m))
		}
		for _, r := range oldRecs {
			if i := slices.IndexFunc(calls, func(c call) bool { return c.op == "remove" && c.id == r.ID }); i < 0 || i > create {
				t.Errorf("%s of the dead sandbox removed at %d, want before the new sandbox at %d", r.ID, i, create)
			}
		}
		if got := h.ops(m, "start")[:1]; !slices.Equal(got, []string{"start init i1#1"}) {
			t.Errorf("first start in the new sandbox = %v, want the init container again", got)
		}
		h.exit(h.rt.newest(t, p.Key(), "i1").ID, 0)
		starts := h.ops(m, "start")
		slices.Sort(starts)
		// restartCount goes on from the dead sandbox's containers.
		if want := []string{"start app a#3", "start app b#1", "start init i1#1"}; !slices.Equal(starts, want) {
			t.Errorf("starts in the new sandbox = %v, want %v", starts, want)
		}
		if ev := h.rep.eventsWith("SandboxChanged"); len(ev) != 1 {
			t.Errorf("SandboxChanged events = %v, want 1", ev)
		}
		st := h.status(p)
		if st.Status.Phase != v1.PodRunning || containerStatusOf(t, st, "a").RestartCount != 3 {
			t.Errorf("phase %s, a's restartCount %d; want Running, 3", st.Status.Phase, containerStatusOf(t, st, "a").RestartCount)
		}
		if n := len(h.rt.records(p.Key())); n != 4 {
			t.Errorf("%d records, want 4 (sandbox, i1, a, b): %v", n, h.rt.records(p.Key()))
		}
	})
}

// TestRunStartsHalfMadeSandbox: staticlet died after creating a sandbox
// and starting its containers, before starting the sandbox's pause. The
// next one starts that sandbox; it does not take it for a dead one and
// replace the pod, which would run its containers again.
func TestRunStartsHalfMadeSandbox(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}})
		recs := runningRecs(p, "old", 0)
		recs[0].State, recs[0].Pinned = pod.TaskCreated, true
		h := newHarness(t, Config{})
		h.rt.seed(recs...)
		h.set(p)
		h.sleep(time.Minute)
		h.wantOps(0)
		if got := h.rt.newest(t, p.Key(), "").State; got != pod.TaskRunning {
			t.Errorf("sandbox state = %s, want running", got)
		}
		if ev := h.rep.eventsWith("SandboxChanged"); len(ev) != 0 {
			t.Errorf("SandboxChanged events = %v, want none", ev)
		}
	})
}

// TestRunHalfMadeSandboxOfFinishedPod: the sandbox of a pod whose
// containers are done was never started (its start failed, or staticlet
// died first): it stays so, rather than run a pause no one stops.
func TestRunHalfMadeSandboxOfFinishedPod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{policy: v1.RestartPolicyNever})
		recs := runningRecs(p, "old", 0)
		recs[0].State = pod.TaskCreated
		recs[1].State, recs[1].FinishedAt = pod.TaskExited, time.Now()
		h := newHarness(t, Config{})
		h.rt.seed(recs...)
		h.set(p)
		h.sleep(time.Minute)
		if got := h.ops(0, "create", "start"); len(got) != 0 {
			t.Errorf("calls = %v, want no sandbox or container started", got)
		}
		if got := h.rt.newest(t, p.Key(), "").State; got != pod.TaskCreated {
			t.Errorf("sandbox state = %s, want created (never started)", got)
		}
		if st := h.status(p); st.Status.Phase != v1.PodSucceeded {
			t.Errorf("phase = %s, want Succeeded", st.Status.Phase)
		}
	})
}

// TestRunNeverPodSandboxDies: a restartPolicy Never pod whose sandbox dies
// after its containers ran gets no new sandbox, in which they would run a
// second time; what still runs is stopped, and the pod ends.
func TestRunNeverPodSandboxDies(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{policy: v1.RestartPolicyNever, apps: []string{"a", "b"}})
		h := newHarness(t, Config{})
		h.set(p)
		h.exit(h.rt.newest(t, p.Key(), "a").ID, 0)
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "").ID, 137)
		h.sleep(time.Minute)
		if got := h.ops(m, "create", "start"); len(got) != 0 {
			t.Errorf("after the sandbox died: %v, want no sandbox and no start", got)
		}
		if got := h.ops(m, "stop"); !slices.Contains(got, "stop "+h.rt.newest(t, p.Key(), "b").ID+" 30s") {
			t.Errorf("stops after the sandbox died = %v, want b stopped", got)
		}
		if st := h.status(p); st.Status.Phase != v1.PodFailed {
			t.Errorf("phase = %s, want Failed (b killed)", st.Status.Phase)
		}
	})
}

// TestRunCreateSandboxFailure: a sandbox that cannot be made is retried,
// with a warning each time, backing off.
func TestRunCreateSandboxFailure(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		h := newHarness(t, Config{})
		h.rt.setCreateErr(errors.New("no space left on device"))
		h.set(p)
		h.sleep(time.Minute)
		// At once, again at once, then after 1s, 2s, 4s, 8s, 16s.
		if n := len(h.since(0, "create")); n != 7 {
			t.Errorf("%d sandbox creations in a minute, want 7", n)
		}
		if ev := h.rep.eventsWith("FailedCreatePodSandBox"); len(ev) == 0 || ev[0].Type != pod.EventWarning {
			t.Errorf("FailedCreatePodSandBox events = %v, want warnings", ev)
		}
		h.rt.setCreateErr(nil)
		h.sleep(32 * time.Second)
		if st := h.status(p); st.Status.Phase != v1.PodRunning {
			t.Errorf("phase after the runtime recovered = %s, want Running", st.Status.Phase)
		}
	})
}

// TestRunCreateSandboxFailureReportsStatus: while its sandbox cannot be
// made, the pod should still be reported (Pending, ContainerCreating), as
// the kubelet does; buildPod handles "no sandbox yet" but sync returns
// before reporting.
func TestRunCreateSandboxFailureReportsStatus(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		h := newHarness(t, Config{})
		h.rt.setCreateErr(errors.New("no space left on device"))
		h.set(p)
		st := h.rep.pod(p.Key())
		if st == nil {
			t.Fatalf("no status reported for a pod whose sandbox cannot be created")
		}
		if st.Status.Phase != v1.PodPending {
			t.Errorf("phase = %s, want Pending", st.Status.Phase)
		}
	})
}

// TestRunMissedExits: an exit with no container ID (the event stream was
// lost) makes every pod look again.
func TestRunMissedExits(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		h := newHarness(t, Config{Resync: time.Hour})
		h.set(p)
		// The exit happens but is not reported.
		h.rt.mu.Lock()
		h.rt.exits = nil
		h.rt.mu.Unlock()
		h.exit(h.rt.newest(t, p.Key(), "app").ID, 1)
		m := h.mark()
		h.sleep(time.Minute)
		h.wantOps(m)
		h.exits <- pod.TaskExit{}
		h.sleep(0)
		h.wantOps(m, "start app app#1")
	})
}

func TestRunDesiredSetChurn(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		q := mkPod(t, podSpec{name: "other"})
		h := newHarness(t, Config{})
		h.set(p, q)
		// Removed and added back in quick succession, without waiting.
		h.desired <- []*pod.Pod{q}
		h.desired <- []*pod.Pod{p, q}
		h.sleep(time.Minute)
		for _, x := range []*pod.Pod{p, q} {
			if st := h.rep.pod(x.Key()); st == nil || st.Status.Phase != v1.PodRunning {
				t.Errorf("%s not reported Running after churn", x.Key())
			}
			running := 0
			for _, r := range h.rt.records(x.Key()) {
				if r.Kind == pod.KindApp && r.State == pod.TaskRunning {
					running++
				}
			}
			if running != 1 {
				t.Errorf("%s has %d running app containers, want 1", x.Key(), running)
			}
		}
	})
}

// TestRunContainerAddedAndRemoved: the app containers are not part of the
// sandbox hash, so adding or dropping one changes only that container.
func TestRunContainerAddedAndRemoved(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p1 := mkPod(t, podSpec{apps: []string{"a", "b"}, grace: 4})
		p2 := mkPod(t, podSpec{apps: []string{"a"}, grace: 4})
		p3 := mkPod(t, podSpec{apps: []string{"a", "c"}, grace: 4})
		if p1.SandboxHash != p2.SandboxHash || p2.SandboxHash != p3.SandboxHash {
			t.Fatalf("test pods differ in SandboxHash")
		}
		h := newHarness(t, Config{})
		h.set(p1)
		b := h.rt.newest(t, p1.Key(), "b")

		m := h.mark()
		h.set(p2)
		h.wantOps(m, "stop "+b.ID+" 4s", "remove "+b.ID)
		if st := h.status(p2); len(st.Status.ContainerStatuses) != 1 || st.Status.Phase != v1.PodRunning {
			t.Errorf("after dropping b: %d container statuses, phase %s; want 1, Running", len(st.Status.ContainerStatuses), st.Status.Phase)
		}

		m = h.mark()
		h.set(p3)
		h.wantOps(m, "start app c#0")
		if c := h.rt.newest(t, p3.Key(), "c"); c.SandboxID != h.rt.newest(t, p3.Key(), "").ID {
			t.Errorf("c started in sandbox %s, want the pod's", c.SandboxID)
		}
	})
}

// TestRunSharedPIDStartsSandboxFirst checks that containers of a pod that
// shares its PID namespace wait for the pause process, which they join; the
// fake reports a container started before it.
func TestRunSharedPIDStartsSandboxFirst(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{sharePID: true, apps: []string{"a", "b"}})
		h := newHarness(t, Config{})
		h.set(p)
		if st := h.status(p); st.Status.Phase != v1.PodRunning {
			t.Errorf("phase %s, want Running", st.Status.Phase)
		}
	})
}

// TestRunSidecars checks restartable init containers: started in order with
// the others and left running, restarted whenever they exit, stopped after
// the app containers when the pod goes.
func TestRunSidecars(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{inits: []string{"proxy", "setup"}, apps: []string{"a"}, sidecars: map[string]bool{"proxy": true}, grace: 5})
		h := newHarness(t, Config{})
		h.set(p)
		h.sleep(time.Minute)
		// The sidecar runs on while the next init container starts.
		h.wantOps(0, "create sb-1", "start init proxy#0", "start init setup#0")
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "setup").ID, 0)
		h.sleep(time.Minute)
		h.wantOps(m, "start app a#0")
		st := h.status(p)
		if st.Status.Phase != v1.PodRunning || st.Status.Conditions[1].Status != v1.ConditionTrue {
			t.Errorf("phase %s, initialized %s; want Running, True", st.Status.Phase, st.Status.Conditions[1].Status)
		}
		if cs := containerStatusOf(t, st, "proxy"); cs.State.Running == nil {
			t.Errorf("sidecar: %s, want running", stateString(cs.State))
		}

		// A sidecar that exits is restarted, even with exit 0.
		m = h.mark()
		h.exit(h.rt.newest(t, p.Key(), "proxy").ID, 0)
		h.sleep(time.Minute)
		h.wantOps(m, "start init proxy#1")

		// Removal stops the app before its sidecar.
		appID, proxyID := h.rt.newest(t, p.Key(), "a").ID, h.rt.newest(t, p.Key(), "proxy").ID
		m = h.mark()
		h.set()
		h.sleep(time.Minute)
		var order []string
		for _, c := range h.since(m, "stop") {
			order = append(order, c.String())
		}
		app, proxy := -1, -1
		for i, o := range order {
			switch {
			case strings.Contains(o, appID):
				app = i
			case strings.Contains(o, proxyID):
				proxy = i
			}
		}
		if app < 0 || proxy < 0 || app > proxy {
			t.Errorf("stops %v: want the app's before the sidecar's", order)
		}
	})
}

// TestRunSidecarStoppedWhenPodCompletes checks that a pod whose app
// containers are done stops its sidecars, then its sandbox.
func TestRunSidecarStoppedWhenPodCompletes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{policy: v1.RestartPolicyNever, inits: []string{"proxy"}, apps: []string{"a"}, sidecars: map[string]bool{"proxy": true}})
		h := newHarness(t, Config{})
		h.set(p)
		h.sleep(time.Minute)
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "a").ID, 0)
		h.sleep(time.Minute)
		proxy, sb := h.rt.newest(t, p.Key(), "proxy"), h.rt.newest(t, p.Key(), "")
		h.wantOps(m, "stop "+proxy.ID+" 30s", "stop "+sb.ID+" 2s")
		if st := h.status(p); st.Status.Phase != v1.PodSucceeded {
			t.Errorf("phase %s, want Succeeded", st.Status.Phase)
		}
	})
}

// TestRunOOMKilled: a container the OOM killer killed ends with reason
// OOMKilled, told once in a Warning event; a kill found at adoption, from
// before the reconciler began, is in the status but told of in no event.
func TestRunOOMKilled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{policy: v1.RestartPolicyNever, apps: []string{"a", "b"}})
		recs := runningRecs(p, "old", 0)
		for i := range recs {
			if recs[i].Name == "b" {
				recs[i].State, recs[i].ExitCode, recs[i].OOMKilled = pod.TaskExited, 137, true
			}
		}
		h := newHarness(t, Config{}, recs...)
		h.set(p)
		h.rt.oomKill(t, h.rt.newest(t, p.Key(), "a").ID)
		h.sleep(2 * time.Minute) // resyncs tell of no kill twice
		for _, name := range []string{"a", "b"} {
			cs := containerStatusOf(t, h.status(p), name)
			if term := cs.State.Terminated; term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
				t.Errorf("%s: state %s, want terminated by OOMKilled with 137", name, stateString(cs.State))
			}
		}
		evs := h.rep.eventsWith("OOMKilled")
		if len(evs) != 1 || evs[0].Container != "a" || evs[0].Type != pod.EventWarning {
			t.Errorf("OOMKilled events = %+v, want one Warning for a", evs)
		}
	})
}

// TestRunRemovePodFilesRetried: a pod's files whose removal failed are
// removed on a later pass, although its containers are gone by then.
func TestRunRemovePodFilesRetried(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		h := newHarness(t, Config{})
		h.set(p)
		h.rt.mu.Lock()
		h.rt.filesErrs = 2
		h.rt.mu.Unlock()
		m := h.mark()
		h.set()
		h.sleep(10 * time.Second)
		var files []string
		for _, c := range h.since(m, "files") {
			files = append(files, c.id)
		}
		if len(files) != 3 || files[0] != string(p.UID) || files[2] != string(p.UID) {
			t.Errorf("RemovePodFiles calls = %q, want 3 for %s: two failures, then the removal", files, p.UID)
		}
	})
}
