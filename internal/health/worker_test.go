package health

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// scripted is a Runtime whose exec commands succeed or fail as the test
// says, by command name, and which records when each ran.
type scripted struct {
	mu   sync.Mutex
	fail map[string]bool
	runs map[string][]time.Duration // since start
	t0   time.Time
}

func newScripted() *scripted {
	return &scripted{fail: map[string]bool{}, runs: map[string][]time.Duration{}, t0: time.Now()}
}

func (s *scripted) set(cmd string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[cmd] = fail
}

func (s *scripted) ran(cmd string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.runs[cmd]...)
}

func (s *scripted) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[cmd[0]] = append(s.runs[cmd[0]], time.Since(s.t0))
	if s.fail[cmd[0]] {
		return 1, []byte(cmd[0] + " failed"), nil
	}
	return 0, nil, nil
}

func (s *scripted) DialPod(ctx context.Context, id, sandboxID, network, addr string) (net.Conn, error) {
	return nil, fmt.Errorf("no network here")
}

func execProbe(cmd string, delay, period, success, failure int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
		InitialDelaySeconds: delay, PeriodSeconds: period, SuccessThreshold: success, FailureThreshold: failure, TimeoutSeconds: 1}
}

// collect gathers verdicts as (seconds since t0, summary) strings.
type collected struct {
	mu  sync.Mutex
	got []string
}

func (c *collected) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// startManager runs a Manager over rt in the bubble, already past its
// first period (so that no start-up jitter applies unless asked), and
// collects its verdicts. opts change its Config.
func startManager(t *testing.T, rt Runtime, settle time.Duration, opts ...func(*Config)) (*Manager, *collected, time.Time) {
	t.Helper()
	cfg := Config{Runtime: rt}
	for _, o := range opts {
		o(&cfg)
	}
	m := New(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	c := &collected{}
	t0 := time.Now()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case v := <-m.Verdicts():
				c.mu.Lock()
				s := fmt.Sprintf("%v %s %s", v.Time.Sub(t0), v.Type, v.Result)
				if v.Failed != "" {
					s += " failed: " + v.Failed
				}
				c.got = append(c.got, s)
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	time.Sleep(settle)
	return m, c, t0
}

func equal(a, b []string) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestWorkerThresholds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newScripted()
		m, c, _ := startManager(t, rt, 0)
		time.Sleep(time.Minute) // past the start-up jitter
		synctest.Wait()
		ctr := &v1.Container{Name: "app", LivenessProbe: execProbe("live", 5, 2, 1, 3), ReadinessProbe: execProbe("ready", 0, 1, 2, 1)}
		rt.set("ready", true)
		tg := targetFor(ctr, true)
		tg.StartedAt = time.Now()
		key := pod.Key{Namespace: "default", Name: "web"}
		m.Set(key, []pod.ProbeTarget{tg})
		m.Set(key, []pod.ProbeTarget{tg}) // idempotent
		time.Sleep(2500 * time.Millisecond)
		rt.set("ready", false)
		time.Sleep(4 * time.Second) // 6.5s
		rt.set("live", true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []string{
			// readiness: fails at 0s (threshold 1), then two successes from 3s.
			"1m0s Readiness Failure failed: ready failed",
			"1m1s Readiness Failure failed: ready failed",
			"1m2s Readiness Failure failed: ready failed",
			"1m4s Readiness Success",
			// liveness at its initial delay, then every 2s; failing from 7s, three times.
			"1m5s Liveness Success",
			"1m7s Liveness Success failed: live failed",
			"1m9s Liveness Success failed: live failed",
			"1m11s Liveness Failure failed: live failed",
		}
		if got := c.all(); !equal(got, want) {
			t.Errorf("verdicts =\n\t%v\nwant\n\t%v", got, want)
		}
		// Liveness failed for good: no more liveness runs.
		if runs := rt.ran("live"); len(runs) != 4 {
			t.Errorf("liveness ran %d times, want 4 (stopped after the failure)", len(runs))
		}
		m.Set(key, nil)
		synctest.Wait()
		n := len(rt.ran("ready"))
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(rt.ran("ready")) != n {
			t.Errorf("probes still ran after Set(nil)")
		}
	})
}

func TestWorkerStartupGates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newScripted()
		m, c, _ := startManager(t, rt, time.Minute)
		ctr := &v1.Container{Name: "app", StartupProbe: execProbe("start", 0, 1, 1, 30),
			LivenessProbe: execProbe("live", 0, 1, 1, 1), ReadinessProbe: execProbe("ready", 0, 1, 1, 1)}
		rt.set("start", true)
		tg := targetFor(ctr, true)
		tg.StartedAt = time.Now()
		m.Set(pod.Key{Namespace: "default", Name: "web"}, []pod.ProbeTarget{tg})
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if n, r := len(rt.ran("live")), len(rt.ran("ready")); n != 0 || r != 0 {
			t.Errorf("before startup succeeded: liveness ran %d times, readiness %d; want none", n, r)
		}
		rt.set("start", false)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n, r, s := len(rt.ran("live")), len(rt.ran("ready")), len(rt.ran("start")); n == 0 || r == 0 || s != 5 {
			t.Errorf("after startup succeeded: liveness ran %d times, readiness %d, startup %d; want some, some, 5", n, r, s)
		}
		got := c.all()
		if len(got) < 5 || got[4] != "1m4s Startup Success" {
			t.Errorf("verdicts = %v, want four startup failures, then success at 4s", got)
		}
	})
}

func TestWorkerJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newScripted()
		m, _, _ := startManager(t, rt, 0)
		key := pod.Key{Namespace: "default", Name: "web"}
		var targets []pod.ProbeTarget
		for i := range 50 {
			ctr := &v1.Container{Name: "app", LivenessProbe: execProbe(fmt.Sprint("c", i), 0, 10, 1, 3)}
			tg := targetFor(ctr, true)
			tg.ContainerID = fmt.Sprint("id", i)
			tg.StartedAt = time.Now().Add(-time.Hour)
			targets = append(targets, tg)
		}
		// Containers found as the manager starts probe at random points
		// of their first period, not all at once.
		m.Set(key, targets)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		seen := map[time.Duration]bool{}
		for i := range 50 {
			runs := rt.ran(fmt.Sprint("c", i))
			if len(runs) != 1 || runs[0] >= 10*time.Second {
				t.Fatalf("container %d ran at %v, want once within the first period", i, runs)
			}
			seen[runs[0]] = true
		}
		if len(seen) < 40 {
			t.Errorf("50 first probes at %d distinct times, want them spread", len(seen))
		}
	})
}

func TestWorkerGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newScripted()
		m, _, _ := startManager(t, rt, time.Minute)
		// Containers that start at scattered times probe first at once,
		// then on the manager's grid, a period apart.
		for i := range 20 {
			ctr := &v1.Container{Name: "app", LivenessProbe: execProbe(fmt.Sprint("c", i), 0, 1, 1, 3)}
			tg := targetFor(ctr, true)
			tg.ContainerID = fmt.Sprint("id", i)
			tg.StartedAt = time.Now()
			m.Set(pod.Key{Namespace: "default", Name: fmt.Sprint("web", i)}, []pod.ProbeTarget{tg})
			time.Sleep(37 * time.Millisecond)
		}
		set := rt.t0.Add(time.Minute)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for i := range 20 {
			runs := rt.ran(fmt.Sprint("c", i))
			if len(runs) < 4 {
				t.Fatalf("container %d ran at %v, want at least 4 runs", i, runs)
			}
			if want := set.Add(time.Duration(i) * 37 * time.Millisecond).Sub(rt.t0); runs[0] != want {
				t.Errorf("container %d first ran at %v, want %v (when it was set)", i, runs[0], want)
			}
			if gap := runs[1] - runs[0]; gap < time.Second || gap >= time.Second+probeGrid {
				t.Errorf("container %d: second run %v after the first, want within [1s, 1s+%v)", i, gap, probeGrid)
			}
			for k := 1; k < len(runs); k++ {
				if runs[k]%probeGrid != 0 {
					t.Errorf("container %d run %d at %v, off the %v grid", i, k, runs[k], probeGrid)
				}
				if k > 1 && runs[k]-runs[k-1] != time.Second {
					t.Errorf("container %d runs %d and %d %v apart, want the period, 1s", i, k-1, k, runs[k]-runs[k-1])
				}
			}
		}
	})
}

// TestWorkerRan checks that Config.Ran hears of every run, before
// thresholds, with its outcome, the container and the pod's UID; and of
// no run that startup gating skipped.
func TestWorkerRan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newScripted()
		var mu sync.Mutex
		var runs []string
		m, _, _ := startManager(t, rt, 0, func(c *Config) {
			c.Ran = func(r pod.ProbeRun) {
				mu.Lock()
				defer mu.Unlock()
				runs = append(runs, fmt.Sprintf("%s %s/%s uid=%s ok=%v took=%v", r.Type, r.Pod, r.Container, r.UID, r.OK, r.Took))
			}
		})
		time.Sleep(time.Minute) // past the start-up jitter
		synctest.Wait()
		ctr := &v1.Container{Name: "app", StartupProbe: execProbe("start", 0, 1, 1, 10), ReadinessProbe: execProbe("ready", 0, 1, 1, 1)}
		rt.set("start", true)
		tg := targetFor(ctr, true)
		tg.Pod.UID = "u1"
		tg.StartedAt = time.Now()
		m.Set(pod.Key{Namespace: "default", Name: "web"}, []pod.ProbeTarget{tg})
		time.Sleep(1500 * time.Millisecond) // startup fails twice: readiness waits
		rt.set("start", false)
		time.Sleep(2 * time.Second) // startup passes once, readiness runs
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []string{
			"Startup default/web/app uid=u1 ok=false took=0s",
			"Startup default/web/app uid=u1 ok=false took=0s",
			"Startup default/web/app uid=u1 ok=true took=0s",
			"Readiness default/web/app uid=u1 ok=true took=0s",
		}
		if n := len(rt.ran("start")) + len(rt.ran("ready")); n != len(runs) {
			t.Errorf("Ran told of %d runs, the runtime ran %d", len(runs), n)
		}
		if len(runs) < len(want) || !equal(runs[:len(want)], want) {
			t.Errorf("runs =\n\t%v\nwant them to begin with\n\t%v", runs, want)
		}
	})
}
