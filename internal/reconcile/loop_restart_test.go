package reconcile

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// restart asks h's reconciler to restart container of p and lets it settle.
func (h *harness) restart(p *pod.Pod, container string) error {
	h.t.Helper()
	err := h.rec.Restart(h.t.Context(), p.Key(), container)
	synctest.Wait()
	return err
}

// withPod runs f in a bubble with a harness that runs the pod s describes.
func withPod(t *testing.T, s podSpec, cfg Config, f func(t *testing.T, h *harness, p *pod.Pod)) {
	t.Helper()
	bubble(t, func(t *testing.T) {
		p := mkPod(t, s)
		h := newHarness(t, cfg)
		h.set(p)
		f(t, h, p)
	})
}

// TestRestartRunning: a running container (an app container or a
// sidecar) is stopped with the pod's grace period and started again at
// once, restartCount up by one, and the event says who asked.
func TestRestartRunning(t *testing.T) {
	tests := []struct {
		name string
		spec podSpec
		kind pod.ContainerKind
	}{
		{"app", podSpec{grace: 7}, pod.KindApp},
		{"proxy", podSpec{grace: 7, inits: []string{"proxy"}, sidecars: map[string]bool{"proxy": true}}, pod.KindInit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withPod(t, tt.spec, Config{}, func(t *testing.T, h *harness, p *pod.Pod) {
				first := h.rt.newest(t, p.Key(), tt.name)
				m := h.mark()
				if err := h.restart(p, tt.name); err != nil {
					t.Fatalf("Restart = %v, want nil", err)
				}
				h.wantOps(m, "stop "+first.ID+" 7s", fmt.Sprintf("start %s %s#1", tt.kind, tt.name))
				cs := containerStatusOf(t, h.status(p), tt.name)
				if cs.RestartCount != 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil {
					t.Errorf("after the restart: %s (last %s), restartCount %d; want running after a termination, 1",
						stateString(cs.State), stateString(cs.LastTerminationState), cs.RestartCount)
				}
				kills := h.rep.eventsWith("Killing")
				if len(kills) != 1 || kills[0].Type != pod.EventNormal || !strings.Contains(kills[0].Message, restartedBy) {
					t.Errorf("Killing events = %+v, want one naming %q", kills, restartedBy)
				}
			})
		})
	}
}

// TestRestartAllContainers: with no container named, every app container
// restarts; the sandbox and the init containers stay.
func TestRestartAllContainers(t *testing.T) {
	withPod(t, podSpec{inits: []string{"setup"}, apps: []string{"a", "b"}}, Config{}, func(t *testing.T, h *harness, p *pod.Pod) {
		h.exit(h.rt.newest(t, p.Key(), "setup").ID, 0)
		a, b := h.rt.newest(t, p.Key(), "a"), h.rt.newest(t, p.Key(), "b")
		m := h.mark()
		if err := h.restart(p, ""); err != nil {
			t.Fatalf("Restart = %v, want nil", err)
		}
		got := h.ops(m)
		want := []string{"stop " + a.ID + " 30s", "stop " + b.ID + " 30s", "start app a#1", "start app b#1"}
		if !slices.Equal(got, want) {
			t.Errorf("calls = %v, want %v", got, want)
		}
	})
}

// TestRestartResetsBackoff: a container waiting out a long backoff starts
// at once, and its next failure waits the initial delay, not the doubled
// one.
func TestRestartResetsBackoff(t *testing.T) {
	withPod(t, podSpec{}, Config{Backoff: Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute, Reset: 10 * time.Minute}}, func(t *testing.T, h *harness, p *pod.Pod) {
		// Crash it until its backoff is 80 s: restarts at 0, 10, 20, 40 s.
		for i := range 5 {
			cur := h.rt.newest(t, p.Key(), "app")
			m := h.mark()
			h.exit(cur.ID, 1)
			if i < 4 {
				h.waitFor(time.Hour, "restart", func() bool { return len(h.since(m, "start")) > 0 })
			}
		}
		cs := containerStatusOf(t, h.status(p), "app")
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount != 4 {
			t.Fatalf("before the restart: %s, restartCount %d; want CrashLoopBackOff, 4", stateString(cs.State), cs.RestartCount)
		}

		m := h.mark()
		if err := h.restart(p, "app"); err != nil {
			t.Fatalf("Restart = %v, want nil", err)
		}
		h.wantOps(m, "start app app#5")
		if ev := h.rep.eventsWith("Restarting"); len(ev) != 1 || !strings.Contains(ev[0].Message, restartedBy) {
			t.Errorf("Restarting events = %+v, want one naming %q", ev, restartedBy)
		}

		// The next failure waits the initial delay again.
		m = h.mark()
		crashed := time.Now()
		h.exit(h.rt.newest(t, p.Key(), "app").ID, 1)
		h.waitFor(time.Hour, "restart after the reset", func() bool { return len(h.since(m, "start")) > 0 })
		if got := h.since(m, "start")[0].at.Sub(crashed); got != 10*time.Second {
			t.Errorf("restart after the reset came after %v, want the initial 10s", got)
		}
		if cs := containerStatusOf(t, h.status(p), "app"); cs.RestartCount != 6 {
			t.Errorf("restartCount = %d, want 6", cs.RestartCount)
		}
	})
}

// TestRestartRefused: what Restart refuses, and that it changes nothing.
func TestRestartRefused(t *testing.T) {
	tests := []struct {
		name      string
		spec      podSpec
		pod       string // pod name asked for; the pod's by default
		container string
		want      error
		notExist  bool
	}{
		{name: "unknown pod", spec: podSpec{}, pod: "nope", want: ErrUnknownPod, notExist: true},
		{name: "unknown container", spec: podSpec{}, container: "nope", want: ErrUnknownContainer, notExist: true},
		{name: "restartPolicy Never", spec: podSpec{policy: v1.RestartPolicyNever}, container: "app", want: ErrNotRestartable},
		{name: "restartPolicy Never, all", spec: podSpec{policy: v1.RestartPolicyNever}, want: ErrNotRestartable},
		{name: "init container", spec: podSpec{inits: []string{"setup"}}, container: "setup", want: ErrNotRestartable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withPod(t, tt.spec, Config{}, func(t *testing.T, h *harness, p *pod.Pod) {
				key := p.Key()
				if tt.pod != "" {
					key.Name = tt.pod
				}
				m := h.mark()
				err := h.rec.Restart(t.Context(), key, tt.container)
				synctest.Wait()
				if !errors.Is(err, tt.want) || errors.Is(err, fs.ErrNotExist) != tt.notExist {
					t.Errorf("Restart(%s, %q) = %v, want %v (not exist: %v)", key, tt.container, err, tt.want, tt.notExist)
				}
				h.wantOps(m)
			})
		})
	}
}

// TestRestartCompleted: a container that completed under OnFailure is not
// run again; an event says so.
func TestRestartCompleted(t *testing.T) {
	for _, apps := range [][]string{{"app"}, {"app", "other"}} {
		t.Run(strings.Join(apps, ","), func(t *testing.T) {
			withPod(t, podSpec{policy: v1.RestartPolicyOnFailure, apps: apps}, Config{}, func(t *testing.T, h *harness, p *pod.Pod) {
				h.exit(h.rt.newest(t, p.Key(), "app").ID, 0)
				m := h.mark()
				if err := h.restart(p, "app"); err != nil {
					t.Fatalf("Restart = %v, want nil", err)
				}
				h.sleep(time.Minute)
				if got := h.ops(m, "start"); len(got) != 0 {
					t.Errorf("starts = %v, want none", got)
				}
				ev := h.rep.eventsWith("Failed")
				if len(ev) != 1 || ev[0].Type != pod.EventWarning || !strings.Contains(ev[0].Message, "not restarted") {
					t.Errorf("Failed events = %+v, want one saying app is not restarted", ev)
				}
			})
		})
	}
}

// TestRestartFailedStart: a container whose start failed, waiting out the
// backoff of failed starts, is tried again at once.
func TestRestartFailedStart(t *testing.T) {
	withPod(t, podSpec{}, Config{Backoff: Backoff{Initial: time.Minute, Max: 5 * time.Minute, Reset: 10 * time.Minute}}, func(t *testing.T, h *harness, p *pod.Pod) {
		h.rt.setStartErr("app", errors.New("no such file: /etc/app.conf"))
		h.exit(h.rt.newest(t, p.Key(), "app").ID, 1)
		h.sleep(2 * time.Minute)
		if cs := containerStatusOf(t, h.status(p), "app"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "CreateContainerError" {
			t.Fatalf("app = %s, want waiting after a failed start", stateString(cs.State))
		}
		h.rt.setStartErr("app", nil)
		m := h.mark()
		if err := h.restart(p, "app"); err != nil {
			t.Fatalf("Restart = %v, want nil", err)
		}
		if got := h.ops(m, "start"); !slices.Equal(got, []string{"start app app#1"}) {
			t.Errorf("starts = %v, want app#1 at once", got)
		}
	})
}

// TestRestartRefusedDuringShutdown: once the node shuts down, nothing is
// restarted.
func TestRestartRefusedDuringShutdown(t *testing.T) {
	withPod(t, podSpec{}, Config{}, func(t *testing.T, h *harness, p *pod.Pod) {
		if err := h.shutdownNode(t.Context(), 10*time.Second, 10*time.Second, time.Minute); err != nil {
			t.Fatalf("ShutdownNode = %v", err)
		}
		m := h.mark()
		if err := h.restart(p, ""); !errors.Is(err, ErrNotRestartable) {
			t.Errorf("Restart during a node shutdown = %v, want %v", err, ErrNotRestartable)
		}
		h.wantOps(m)
	})
}

// TestRestartSandboxBackOff: a pod whose sandbox could not be made waits
// out the sandbox's backoff; a restart tries it again at once, and starts
// the containers in it.
func TestRestartSandboxBackOff(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{})
		h := newHarness(t, Config{Backoff: Backoff{Initial: time.Minute, Max: 5 * time.Minute, Reset: 10 * time.Minute}})
		h.rt.setCreateErr(errors.New("no space left on device"))
		h.set(p)
		h.sleep(90 * time.Second) // failed at 0 and 60 s: the next try is at 180 s
		if st := h.status(p); len(h.rep.eventsWith("BackOff")) == 0 {
			t.Fatalf("no sandbox BackOff event; status %+v", st.Status)
		}
		h.rt.setCreateErr(nil)
		m := h.mark()
		if err := h.restart(p, ""); err != nil {
			t.Fatalf("Restart = %v, want nil", err)
		}
		if got := h.ops(m, "create", "start"); len(got) != 2 || !strings.HasPrefix(got[0], "create") || got[1] != "start app app#0" {
			t.Errorf("after the restart: %v, want the sandbox made and app started at once", got)
		}
	})
}
