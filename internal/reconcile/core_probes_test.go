package reconcile

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// probePod is a pod with one container "app" carrying the probes given
// as YAML (indented for the container), under restart policy policy.
func probePod(t *testing.T, policy string, probes string) *pod.Pod {
	t.Helper()
	return decodePod(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 20
  containers:
  - name: app
    image: busybox:1.36
%s`, policy, probes))
}

const (
	livenessYAML = `    livenessProbe:
      httpGet: {path: /, port: 80}
      terminationGracePeriodSeconds: 3
`
	readinessYAML = `    readinessProbe:
      tcpSocket: {port: 80}
`
	startupYAML = `    startupProbe:
      exec: {command: [cat, /ok]}
`
)

func readyCond(st *v1.Pod) v1.ConditionStatus {
	for _, c := range st.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status
		}
	}
	return ""
}

func TestProbeLivenessFailureRestarts(t *testing.T) {
	for _, tt := range []struct {
		policy  string
		restart bool
	}{{"Always", true}, {"OnFailure", true}, {"Never", false}} {
		t.Run(tt.policy, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				p := probePod(t, tt.policy, livenessYAML)
				h := newHarness(t, Config{})
				h.set(p)
				first := h.rt.newest(t, p.Key(), "app")
				if got := h.prober.probed(p.Key()); got["app"] != first.ID {
					t.Fatalf("probed = %v, want app as %s", got, first.ID)
				}
				if cs := containerStatusOf(t, h.status(p), "app"); !cs.Ready || cs.Started == nil || !*cs.Started {
					t.Errorf("app with only a liveness probe: ready %v started %v, want both", cs.Ready, cs.Started)
				}
				h.verdict(p, "app", pod.Liveness, pod.ProbeSuccess, "")
				m := h.mark()
				// A failed run below the threshold is an event, no kill.
				h.verdict(p, "app", pod.Liveness, pod.ProbeSuccess, "HTTP probe failed with statuscode: 404")
				h.wantOps(m)
				if ev := h.rep.eventsWith("Unhealthy"); len(ev) != 1 || ev[0].Message != "Liveness probe failed: HTTP probe failed with statuscode: 404" || ev[0].Type != pod.EventWarning {
					t.Errorf("Unhealthy events = %+v, want one Liveness probe failed", ev)
				}
				h.verdict(p, "app", pod.Liveness, pod.ProbeFailure, "HTTP probe failed with statuscode: 404")
				want := []string{"stop " + first.ID + " 3s"}
				if tt.restart {
					want = append(want, "start app app#1")
				} else {
					// Nothing runs in the pod again: its sandbox goes.
					want = append(want, "stop sb-1 2s")
				}
				h.wantOps(m, want...)
				kills := h.rep.eventsWith("Killing")
				if len(kills) != 1 || kills[0].Message != "Container app failed liveness probe, will be restarted" {
					t.Errorf("Killing events = %+v", kills)
				}
				cs := containerStatusOf(t, h.status(p), "app")
				if tt.restart {
					if cs.RestartCount != 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil {
						t.Errorf("after the kill: %s (last %s) restartCount %d; want running after a termination, 1",
							stateString(cs.State), stateString(cs.LastTerminationState), cs.RestartCount)
					}
					if got := h.prober.probed(p.Key())["app"]; got == first.ID || got == "" {
						t.Errorf("probed app %q after the restart, want the new container", got)
					}
				} else if cs.State.Terminated == nil {
					t.Errorf("under Never: %s, want terminated", stateString(cs.State))
				}
			})
		})
	}
}

func TestProbeReadinessFlipsReady(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := probePod(t, "Always", readinessYAML)
		h := newHarness(t, Config{})
		h.set(p)
		ready := func() (bool, v1.ConditionStatus) {
			st := h.status(p)
			return containerStatusOf(t, st, "app").Ready, readyCond(st)
		}
		if r, c := ready(); r || c != v1.ConditionFalse {
			t.Errorf("before any readiness verdict: ready %v, Ready %s; want false", r, c)
		}
		m := h.mark()
		h.verdict(p, "app", pod.Readiness, pod.ProbeSuccess, "")
		if r, c := ready(); !r || c != v1.ConditionTrue {
			t.Errorf("after success: ready %v, Ready %s; want true", r, c)
		}
		h.verdict(p, "app", pod.Readiness, pod.ProbeFailure, "dial tcp: connection refused")
		if r, c := ready(); r || c != v1.ConditionFalse {
			t.Errorf("after failure: ready %v, Ready %s; want false", r, c)
		}
		h.verdict(p, "app", pod.Readiness, pod.ProbeSuccess, "")
		if r, c := ready(); !r || c != v1.ConditionTrue {
			t.Errorf("after success again: ready %v, Ready %s; want true", r, c)
		}
		h.wantOps(m) // nothing stopped or started
		if ev := h.rep.eventsWith("Unhealthy"); len(ev) != 1 || !strings.HasPrefix(ev[0].Message, "Readiness probe failed: ") {
			t.Errorf("Unhealthy events = %+v", ev)
		}
	})
}

func TestProbeStartupGates(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := probePod(t, "Always", startupYAML+livenessYAML+readinessYAML)
		h := newHarness(t, Config{})
		h.set(p)
		state := func() (started, ready bool) {
			cs := containerStatusOf(t, h.status(p), "app")
			return cs.Started != nil && *cs.Started, cs.Ready
		}
		if s, r := state(); s || r {
			t.Errorf("before startup: started %v ready %v, want neither", s, r)
		}
		// Readiness alone is not enough while startup has not succeeded.
		h.verdict(p, "app", pod.Readiness, pod.ProbeSuccess, "")
		if s, r := state(); s || r {
			t.Errorf("readiness before startup: started %v ready %v, want neither", s, r)
		}
		h.verdict(p, "app", pod.Startup, pod.ProbeSuccess, "")
		if s, r := state(); !s || !r {
			t.Errorf("after startup: started %v ready %v, want both", s, r)
		}
	})
}

func TestProbeStartupFailureRestarts(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := probePod(t, "Always", startupYAML)
		h := newHarness(t, Config{})
		h.set(p)
		first := h.rt.newest(t, p.Key(), "app")
		m := h.mark()
		h.verdict(p, "app", pod.Startup, pod.ProbeFailure, "command \"cat /ok\" exited with 1")
		// No probe-level grace: the pod's.
		h.wantOps(m, "stop "+first.ID+" 20s", "start app app#1")
		if kills := h.rep.eventsWith("Killing"); len(kills) != 1 || kills[0].Message != "Container app failed startup probe, will be restarted" {
			t.Errorf("Killing events = %+v", kills)
		}
	})
}

func TestProbeTargetsFollowContainers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := probePod(t, "Always", livenessYAML)
		h := newHarness(t, Config{})
		h.set(p)
		id := h.rt.newest(t, p.Key(), "app").ID
		if got := h.prober.probed(p.Key()); !maps.Equal(got, map[string]string{"app": id}) {
			t.Errorf("probed = %v", got)
		}
		// A crash: the old container is no longer probed.
		h.exit(id, 1)
		if got := h.prober.probed(p.Key()); got["app"] == id {
			t.Errorf("probed = %v after a crash, want the new container", got)
		}
		h.set()
		h.waitFor(time.Minute, "removal", func() bool { return len(h.rt.records(p.Key())) == 0 })
		if got := h.prober.probed(p.Key()); len(got) != 0 {
			t.Errorf("probed = %v after removal, want nothing", got)
		}
	})
}
