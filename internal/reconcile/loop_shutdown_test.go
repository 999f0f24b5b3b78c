package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// shutdownPod is a one-container pod name (container "c") with the given
// grace period, in priority class class ("" for none), whose container has
// a preStop exec hook when preStop is set.
func shutdownPod(t *testing.T, name, class string, grace int, preStop bool) *pod.Pod {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: kube-system\nspec:\n  terminationGracePeriodSeconds: %d\n", name, grace)
	if class != "" {
		fmt.Fprintf(&b, "  priorityClassName: %s\n", class)
	}
	b.WriteString("  containers:\n  - name: c\n    image: busybox:1.36\n")
	if preStop {
		b.WriteString("    lifecycle:\n" + preStopExec)
	}
	return decodePod(t, b.String())
}

// shutdownNode runs ShutdownNode in the background and returns its result
// once it has returned, failing if that takes more than limit of fake time.
func (h *harness) shutdownNode(ctx context.Context, regular, critical, limit time.Duration) error {
	h.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- h.rec.ShutdownNode(ctx, regular, critical) }()
	var err error
	h.waitFor(limit, "ShutdownNode returning", func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	return err
}

// TestShutdownNodeOrder: the regular pods are all stopped, in the reverse
// of the order they became Ready and preStop hooks included, before any
// critical pod is; each container gets
// its pod's grace period cut to its group's budget; the containers are
// stopped, not removed, and the pods report the kubelet's node shutdown
// status.
func TestShutdownNodeOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		slow := shutdownPod(t, "slow", "", 60, true) // grace cut to the regular budget
		quick := shutdownPod(t, "quick", "", 5, false)
		etcd := shutdownPod(t, "etcd", "system-node-critical", 30, false) // cut to the critical budget
		apiserver := shutdownPod(t, "apiserver", "system-cluster-critical", 4, false)
		h := newHarness(t, Config{})
		h.rt.setHook("preStop", "c", fakeHook{takes: 3 * time.Second})
		// quick becomes Ready last, so it stops first.
		h.set(slow, etcd, apiserver)
		h.set(slow, quick, etcd, apiserver)
		for _, p := range []*pod.Pod{slow, quick, etcd, apiserver} {
			if st := h.status(p); st.Status.Phase != v1.PodRunning {
				t.Fatalf("pod %s is %s before the shutdown, want Running", p.Name, st.Status.Phase)
			}
		}

		m := h.mark()
		if err := h.shutdownNode(t.Context(), 20*time.Second, 10*time.Second, time.Minute); err != nil {
			t.Fatalf("ShutdownNode = %v, want nil", err)
		}
		calls := h.since(m, "stop", "hook", "remove")
		lastRegular, firstCritical := -1, len(calls)
		stops := map[pod.Key]time.Duration{} // of each pod's container "c"
		for i, c := range calls {
			if c.op == "remove" {
				t.Errorf("%s: a node shutdown stops containers but keeps them for their status", c)
			}
			if c.op == "stop" && c.kind == pod.KindApp {
				stops[c.pod] = c.grace
			}
			switch c.pod {
			case slow.Key(), quick.Key():
				lastRegular = i
			case etcd.Key(), apiserver.Key():
				firstCritical = min(firstCritical, i)
			default:
				t.Errorf("%s: of no known pod", c)
			}
		}
		if lastRegular > firstCritical {
			t.Errorf("calls =\n\t%s\nwant every regular pod's before any critical pod's", strings.Join(h.ops(m, "stop", "hook"), "\n\t"))
		}
		// slow: its 60s cut to the regular 20s, of which its hook used 3s.
		want := map[*pod.Pod]time.Duration{slow: 17 * time.Second, quick: 5 * time.Second, etcd: 10 * time.Second, apiserver: 4 * time.Second}
		for p, g := range want {
			if stops[p.Key()] != g {
				t.Errorf("container c of %s stopped with grace %v, want %v", p.Name, stops[p.Key()], g)
			}
		}
		// The regular pods stop in the reverse of the order they became
		// Ready: quick first, not waiting for the slow one's hook.
		var slowAt, quickAt time.Time
		for _, c := range calls {
			if c.op == "stop" && c.kind == pod.KindApp && c.pod == slow.Key() {
				slowAt = c.at
			}
			if c.op == "stop" && c.kind == pod.KindApp && c.pod == quick.Key() {
				quickAt = c.at
			}
		}
		if !quickAt.Before(slowAt) {
			t.Errorf("quick pod stopped at %v, slow pod (3s hook) at %v: want quick, Ready last, stopped first", quickAt, slowAt)
		}

		for _, p := range []*pod.Pod{slow, quick, etcd, apiserver} {
			st := h.status(p).Status
			if st.Phase != v1.PodFailed || st.Reason != "Terminated" || st.Message != "Pod was terminated in response to imminent node shutdown." {
				t.Errorf("pod %s: phase %s, reason %q, message %q; want the node shutdown's Failed status", p.Name, st.Phase, st.Reason, st.Message)
			}
			if cs := containerStatusOf(t, h.status(p), "c"); cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 143 {
				t.Errorf("pod %s: container state %s, want terminated with 143", p.Name, stateString(cs.State))
			}
			if !slices.ContainsFunc(st.Conditions, func(c v1.PodCondition) bool {
				return c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet
			}) {
				t.Errorf("pod %s: conditions %+v, want DisruptionTarget True by the kubelet", p.Name, st.Conditions)
			}
		}
		if n := len(h.rep.eventsWith("NodeShutdown")); n != 4 {
			t.Errorf("%d NodeShutdown events, want one per pod", n)
		}
		if got := h.prober.probed(slow.Key()); len(got) != 0 {
			t.Errorf("containers still probed after the shutdown: %v", got)
		}
	})
}

// TestShutdownNodeHoldsAndResumes: once the node is shut down, nothing is
// restarted, however long it waits, and a new pod is not started; after
// ResumeNode every pod runs again, the new one included.
func TestShutdownNodeHoldsAndResumes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		web := shutdownPod(t, "web", "", 10, false)
		etcd := shutdownPod(t, "etcd", "system-node-critical", 10, false)
		h := newHarness(t, Config{})
		h.set(web, etcd)
		if err := h.shutdownNode(t.Context(), 20*time.Second, 10*time.Second, time.Minute); err != nil {
			t.Fatalf("ShutdownNode = %v, want nil", err)
		}

		m := h.mark()
		late := shutdownPod(t, "late", "", 10, false)
		h.set(web, etcd, late)
		h.sleep(10 * time.Minute) // many resyncs and backoffs
		if got := h.ops(m, "create", "start"); len(got) != 0 {
			t.Errorf("calls while the node is shut down = %v, want none", got)
		}
		if st := h.status(web).Status; st.Phase != v1.PodFailed || st.Reason != "Terminated" {
			t.Errorf("web while shut down: phase %s, reason %q; want Failed, Terminated", st.Phase, st.Reason)
		}

		h.rec.ResumeNode()
		h.waitFor(time.Minute, "every pod running again", func() bool {
			for _, p := range []*pod.Pod{web, etcd, late} {
				if st := h.rep.pod(p.Key()); st == nil || st.Status.Phase != v1.PodRunning {
					return false
				}
			}
			return true
		})
		if st := h.status(web).Status; st.Reason != "" || st.Message != "" {
			t.Errorf("web after resuming: reason %q, message %q; want none", st.Reason, st.Message)
		}
		// The stopped pods get new sandboxes; their restart counts go on.
		if cs := containerStatusOf(t, h.status(web), "c"); cs.RestartCount != 1 {
			t.Errorf("web's container restartCount = %d after resuming, want 1", cs.RestartCount)
		}
	})
}

// TestShutdownNodeOutlastsRun: staticlet told to exit (Run's context
// cancelled) in the middle of a node shutdown finishes the stops, the
// critical pod's included, before Run returns.
func TestShutdownNodeOutlastsRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		web := shutdownPod(t, "web", "", 30, true)
		etcd := shutdownPod(t, "etcd", "system-node-critical", 30, false)
		h := newHarness(t, Config{})
		h.rt.setHook("preStop", "c", fakeHook{takes: 5 * time.Second})
		h.set(web, etcd)

		errc := make(chan error, 1)
		go func() { errc <- h.rec.ShutdownNode(t.Context(), 20*time.Second, 10*time.Second) }()
		h.sleep(time.Second) // web's preStop hook runs
		h.stop()
		h.waitFor(time.Minute, "Run returning", func() bool {
			select {
			case <-h.runDone:
				return true
			default:
				return false
			}
		})
		if err := <-errc; err != nil {
			t.Errorf("ShutdownNode = %v, want nil", err)
		}
		for _, p := range []*pod.Pod{web, etcd} {
			for _, r := range h.rt.records(p.Key()) {
				if r.State == pod.TaskRunning {
					t.Errorf("%s (%s) of pod %s still runs after Run returned", r.ID, r.Kind, p.Name)
				}
			}
		}
	})
}

// TestCritical checks which pods are stopped last.
func TestCritical(t *testing.T) {
	tests := []struct {
		class string
		want  bool
	}{
		{"", false},
		{"system-node-critical", true},
		{"system-cluster-critical", true},
		{"high-priority", false},
	}
	for _, tt := range tests {
		if got := critical(shutdownPod(t, "p", tt.class, 1, false)); got != tt.want {
			t.Errorf("critical(priorityClassName %q) = %v, want %v", tt.class, got, tt.want)
		}
	}
	p := shutdownPod(t, "p", "", 1, false)
	for _, prio := range []int32{1999999999, 2000000000} {
		p.Spec.Priority = &prio
		if got, want := critical(p), prio >= 2000000000; got != want {
			t.Errorf("critical(priority %d) = %v, want %v", prio, got, want)
		}
	}
}
