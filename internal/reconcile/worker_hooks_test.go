package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// hookPod is a pod "web" whose containers are given as name: lifecycle
// YAML (indented under "lifecycle:"; empty for none); init containers
// named in sidecars restart Always.
func hookPod(t *testing.T, grace int, image string, inits, apps [][2]string) *pod.Pod {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\nspec:\n  terminationGracePeriodSeconds: %d\n", grace)
	list := func(field string, cs [][2]string, sidecar bool) {
		if len(cs) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s:\n", field)
		for _, c := range cs {
			fmt.Fprintf(&b, "  - name: %s\n    image: %s\n", c[0], image)
			if sidecar {
				b.WriteString("    restartPolicy: Always\n")
			}
			if c[1] != "" {
				fmt.Fprintf(&b, "    lifecycle:\n%s", c[1])
			}
		}
	}
	list("initContainers", inits, true)
	list("containers", apps, false)
	return decodePod(t, b.String())
}

const (
	preStopExec   = "      preStop: {exec: {command: [sh, -c, 'echo bye']}}\n"
	preStopSleep  = "      preStop: {sleep: {seconds: 4}}\n"
	postStartExec = "      postStart: {exec: {command: [sh, -c, 'echo hi']}}\n"
)

// TestRunPreStop checks that the preStop hook runs before the stop signal
// and that the two share the grace period, for each way a hook ends.
func TestRunPreStop(t *testing.T) {
	tests := []struct {
		name      string
		lifecycle string
		hook      fakeHook
		wantHook  bool          // RunHook is called (a sleep hook is the reconciler's)
		wantGrace time.Duration // left for the stop signal
		wantEvent bool          // FailedPreStopHook
	}{
		{"exec", preStopExec, fakeHook{takes: 3 * time.Second}, true, 7 * time.Second, false},
		{"failing exec", preStopExec, fakeHook{takes: time.Second, err: errors.New("exit 1")}, true, 9 * time.Second, true},
		// A hook that outlasts the grace is cut off at its end; the
		// container still gets the kubelet's 2s for the signal.
		{"exec longer than the grace", preStopExec, fakeHook{takes: time.Hour}, true, minGraceAfterPreStop, false},
		{"sleep", preStopSleep, fakeHook{}, false, 6 * time.Second, false},
		{"none", "", fakeHook{}, false, 10 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				p := hookPod(t, 10, "busybox:1.36", nil, [][2]string{{"a", tt.lifecycle}})
				h := newHarness(t, Config{})
				h.rt.setHook("preStop", "a", tt.hook)
				h.set(p)
				a := h.rt.newest(t, p.Key(), "a")

				m := h.mark()
				h.set()
				h.sleep(time.Minute)
				var want []string
				if tt.wantHook {
					want = append(want, "hook preStop "+a.ID)
					if tt.hook.err != nil || tt.hook.takes > 10*time.Second {
						want[0] += " failed"
					}
				}
				want = append(want, fmt.Sprintf("stop %s %v", a.ID, tt.wantGrace), "remove "+a.ID)
				if got := first(h.ops(m, "hook", "stop", "remove"), len(want)); !slices.Equal(got, want) {
					t.Errorf("calls = %v, want %v first", got, want)
				}
				// The Killing event comes before the hook.
				events := h.ops(m, "event", "hook", "stop")
				kill := slices.Index(events, "event Killing a")
				hook := slices.IndexFunc(events, func(s string) bool { return strings.HasPrefix(s, "hook ") })
				if kill < 0 || (tt.wantHook && kill > hook) {
					t.Errorf("calls = %v, want the container's Killing event before its hook", events)
				}
				failed := h.rep.eventsWith("FailedPreStopHook")
				if got := len(failed) > 0; got != tt.wantEvent {
					t.Errorf("FailedPreStopHook events = %+v, want some: %v", failed, tt.wantEvent)
				}
				if tt.wantEvent && (failed[0].Type != pod.EventWarning || !strings.Contains(failed[0].Message, "exit 1") ||
					!strings.Contains(failed[0].Message, "Exec lifecycle hook ([sh -c echo bye])")) {
					t.Errorf("FailedPreStopHook event = %+v, want a Warning naming the command and the error", failed[0])
				}
			})
		})
	}
}

// TestRunPreStopOrder: on removal the app containers stop first, each
// after its preStop hook, then the sidecars, each after its own; then
// they are removed.
func TestRunPreStopOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := hookPod(t, 10, "busybox:1.36", [][2]string{{"proxy", preStopExec}}, [][2]string{{"a", preStopExec}})
		h := newHarness(t, Config{})
		h.rt.setHook("preStop", "a", fakeHook{takes: 2 * time.Second})
		h.rt.setHook("preStop", "proxy", fakeHook{takes: time.Second})
		h.set(p)
		h.sleep(time.Minute)
		a, proxy := h.rt.newest(t, p.Key(), "a"), h.rt.newest(t, p.Key(), "proxy")
		m := h.mark()
		h.set()
		h.sleep(time.Minute)
		want := []string{
			"hook preStop " + a.ID, "stop " + a.ID + " 8s",
			"hook preStop " + proxy.ID, "stop " + proxy.ID + " 9s",
			"remove " + a.ID, "remove " + proxy.ID,
		}
		got := first(h.ops(m, "hook", "stop", "remove"), len(want))
		if len(got) == len(want) { // removed at once: in any order
			slices.Sort(got[4:])
			slices.Sort(want[4:])
		}
		if !slices.Equal(got, want) {
			t.Errorf("calls = \n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	})
}

// TestRunPreStopOnChange: a container replaced by a new definition, and a
// sidecar stopped when the pod completes, run their preStop hooks too, the
// old definition's in the first case.
func TestRunPreStopOnChange(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p1 := hookPod(t, 10, "busybox:1.36", nil, [][2]string{{"a", preStopExec}})
		p2 := hookPod(t, 10, "busybox:1.37", nil, [][2]string{{"a", ""}})
		h := newHarness(t, Config{})
		h.rt.setHook("preStop", "a", fakeHook{takes: 5 * time.Second})
		h.set(p1)
		a := h.rt.newest(t, p1.Key(), "a")
		m := h.mark()
		h.set(p2)
		h.sleep(time.Minute)
		h.wantOps(m, "hook preStop "+a.ID, "stop "+a.ID+" 5s", "remove "+a.ID, "start app a#1")

		// The new definition has no hook.
		b := h.rt.newest(t, p2.Key(), "a")
		m = h.mark()
		h.set()
		h.sleep(time.Minute)
		if got := h.ops(m, "hook"); len(got) != 0 {
			t.Errorf("hooks run on removal of %s = %v, want none", b.ID, got)
		}
	})
	bubble(t, func(t *testing.T) {
		p := decodePod(t, `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kube-system}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: proxy
    image: busybox:1.36
    restartPolicy: Always
    lifecycle: {preStop: {sleep: {seconds: 3}}}
  containers:
  - {name: a, image: busybox:1.36}
`)
		h := newHarness(t, Config{})
		h.set(p)
		h.sleep(time.Minute)
		m := h.mark()
		h.exit(h.rt.newest(t, p.Key(), "a").ID, 0)
		h.sleep(time.Minute)
		proxy, sb := h.rt.newest(t, p.Key(), "proxy"), h.rt.newest(t, p.Key(), "")
		h.wantOps(m, "stop "+proxy.ID+" 7s", "stop "+sb.ID+" 2s")
	})
}

// TestRunPostStart: a container counts as started only once its postStart
// hook has returned; a failed hook is an event, the container is stopped
// (its preStop hook first) and restarted by its policy, with backoff.
func TestRunPostStart(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := hookPod(t, 10, "busybox:1.36", nil, [][2]string{{"a", postStartExec + preStopExec}, {"b", ""}})
		h := newHarness(t, Config{})
		h.rt.setHook("postStart", "a", fakeHook{takes: 5 * time.Second})
		h.set(p)
		h.sleep(time.Minute)
		a := h.rt.newest(t, p.Key(), "a")
		h.wantOps(0, "create sb-1", "start app a#0", "hook postStart "+a.ID, "start app b#0")
		// No status while the hook ran: a is not Running before it returns.
		calls := h.log.all()
		start := slices.IndexFunc(calls, func(c call) bool { return c.op == "start" && c.name == "a" })
		hook := slices.IndexFunc(calls, func(c call) bool { return c.op == "hook" })
		if setpod := slices.IndexFunc(calls[start:hook], func(c call) bool { return c.op == "setpod" }); setpod >= 0 {
			t.Errorf("status reported at %d, between the start of a (%d) and the end of its postStart hook (%d)", start+setpod, start, hook)
		}
		if calls[hook].at.Sub(calls[start].at) != 5*time.Second {
			t.Errorf("postStart hook ended %v after the start, want the 5s it takes", calls[hook].at.Sub(calls[start].at))
		}
		if cs := containerStatusOf(t, h.status(p), "a"); cs.State.Running == nil {
			t.Errorf("a: %s after its hook, want running", stateString(cs.State))
		}

		// A failing hook: a is stopped, with its preStop hook, and restarted
		// at once, then after the backoff (1s, 2s...).
		h.rt.setHook("postStart", "a", fakeHook{err: errors.New("command 'sh -c exit 1' exited with 1: ")})
		m := h.mark()
		h.exit(a.ID, 1)
		h.sleep(1500 * time.Millisecond)
		var want []string
		for _, c := range h.since(m, "start") {
			want = append(want, c.String(), "hook postStart "+c.id+" failed", "hook preStop "+c.id, "stop "+c.id+" 10s")
		}
		// Then the first container's record goes, past the two kept: it has
		// exited, so no hook.
		h.wantOps(m, append(want, "stop "+a.ID+" 10s", "remove "+a.ID)...)
		if got := h.ops(m, "start"); !slices.Equal(got, []string{"start app a#1", "start app a#2"}) {
			t.Errorf("starts = %v, want a#1 at once and a#2 after 1s", got)
		}
		ev := h.rep.eventsWith("FailedPostStartHook")
		if len(ev) != 2 || ev[0].Type != pod.EventWarning || ev[0].Container != "a" || !strings.Contains(ev[0].Message, "exited with 1") {
			t.Errorf("FailedPostStartHook events = %+v, want two Warnings for a with the hook's error", ev)
		}
		if cs := containerStatusOf(t, h.status(p), "a"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount != 2 {
			t.Errorf("a: %s, restarts %d; want waiting in CrashLoopBackOff after 2 restarts", stateString(cs.State), cs.RestartCount)
		}
		m = h.mark()
		h.sleep(2 * time.Second)
		if got := h.ops(m, "start"); !slices.Equal(got, []string{"start app a#3"}) {
			t.Errorf("starts after the backoff = %v, want a#3", got)
		}
	})
}

// TestRunPostStartInitContainer: the next init container waits for a
// sidecar's postStart hook, and does not start when it fails.
func TestRunPostStartInitContainer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := hookPod(t, 10, "busybox:1.36", [][2]string{{"proxy", postStartExec}}, [][2]string{{"a", ""}})
		h := newHarness(t, Config{})
		h.rt.setHook("postStart", "proxy", fakeHook{err: errors.New("no")})
		h.set(p)
		h.sleep(500 * time.Millisecond)
		var want []string
		for _, c := range h.since(0, "start") {
			want = append(want, c.String(), "hook postStart "+c.id+" failed", "stop "+c.id+" 10s")
		}
		h.wantOps(0, append([]string{"create sb-1"}, want...)...)
		if len(want) != 6 {
			t.Errorf("calls = %v, want two starts of proxy, the second at once", want)
		}
		h.rt.setHook("postStart", "proxy", fakeHook{})
		m := h.mark()
		h.sleep(time.Second)
		proxy := h.rt.newest(t, p.Key(), "proxy")
		h.wantOps(m, "start init proxy#2", "hook postStart "+proxy.ID, "start app a#0")
	})
}

// TestRunPostStartAbandoned: removing a pod whose container waits on a
// postStart hook does not wait for the hook.
func TestRunPostStartAbandoned(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := hookPod(t, 10, "busybox:1.36", nil, [][2]string{{"a", postStartExec}})
		h := newHarness(t, Config{})
		h.rt.setHook("postStart", "a", fakeHook{takes: 24 * time.Hour})
		h.desired <- []*pod.Pod{p}
		h.sleep(time.Minute)
		a := h.rt.newest(t, p.Key(), "a")
		m := h.mark()
		h.set()
		h.sleep(time.Minute)
		want := []string{"hook postStart " + a.ID + " failed", "stop " + a.ID + " 10s", "remove " + a.ID,
			"stop sb-1 2s", "remove sb-1", "files kube-system/web-n", "delete kube-system/web-n"}
		got := h.ops(m)
		// A late exit of the stopped container may make the reconciler look
		// at the gone pod once more and report its deletion again.
		for len(got) > len(want) && got[len(got)-1] == want[len(want)-1] {
			got = got[:len(got)-1]
		}
		if !slices.Equal(got, want) {
			t.Errorf("calls = \n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
		if ev := h.rep.eventsWith("FailedPostStartHook"); len(ev) != 0 {
			t.Errorf("FailedPostStartHook events = %+v, want none for an abandoned hook", ev)
		}
		if h.rep.pod(p.Key()) != nil {
			t.Errorf("pod still reported after removal")
		}
	})
}

// TestRunHookHandlers: tcpSocket, which validation lets through, is no
// lifecycle handler: the hook fails without the runtime.
func TestRunHookHandlers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := hookPod(t, 10, "busybox:1.36", nil, [][2]string{{"a", "      postStart: {tcpSocket: {port: 80}}\n"}})
		h := newHarness(t, Config{})
		h.set(p)
		if got := h.ops(0, "hook"); len(got) != 0 {
			t.Errorf("RunHook calls = %v, want none", got)
		}
		ev := h.rep.eventsWith("FailedPostStartHook")
		if len(ev) == 0 || !strings.Contains(ev[0].Message, "invalid handler") {
			t.Errorf("FailedPostStartHook events = %+v, want one saying the handler is invalid", ev)
		}
	})
}

// first returns the first n of s, or all of s when it is shorter.
func first(s []string, n int) []string {
	return s[:min(n, len(s))]
}
