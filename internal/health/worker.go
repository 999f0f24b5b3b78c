package health

import (
	"context"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// worker runs one probe of one container, as the kubelet's prober worker
// does: after the initial delay, every period, a run at most timeout long;
// the result changes once failureThreshold runs in a row failed or
// successThreshold in a row succeeded.
type worker struct {
	m    *Manager
	key  pod.Key
	c    *containerProbes
	typ  pod.ProbeType
	spec *v1.Probe

	// Owned by the worker's goroutine.
	result pod.ProbeResult
	streak int // runs in a row with the outcome of the last one
	last   bool
}

// periodOf is a probe's period; the API's default is 10 seconds.
func periodOf(pr *v1.Probe) time.Duration {
	if pr.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(pr.PeriodSeconds) * time.Second
}

// run probes until ctx ends, or until a liveness or startup probe failed
// for good: the container will be killed, and a new one gets new workers.
// managerStart is when the manager started: probes of containers found
// then start at a random point of their first period, so that a staticlet
// restarted under many pods does not probe them all at once.
func (w *worker) run(ctx context.Context, managerStart time.Time) {
	t := w.c.target
	chk, err := newCheck(w.m.cfg.Runtime, t, w.spec)
	if err != nil {
		// As with the kubelet, a probe that cannot run fails.
		chk = func(context.Context) (string, error) { return "", err }
	}
	period := periodOf(w.spec)
	now := time.Now()
	first := t.StartedAt.Add(time.Duration(w.spec.InitialDelaySeconds) * time.Second)
	if first.Before(now) {
		first = now
	}
	if now.Sub(managerStart) < period {
		if j := now.Add(rand.N(period)); j.After(first) {
			first = j
		}
	}
	timer := time.NewTimer(first.Sub(now))
	defer timer.Stop()
	next := first
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !w.probe(ctx, chk) {
			return
		}
		// Runs after the first fall on the manager's grid, a period
		// apart; a run that overran its period is followed at once.
		next = next.Add(period)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		next = onGrid(managerStart, next)
		timer.Reset(time.Until(next))
	}
}

// probeGrid is the spacing of the instants probes run at after their
// first run. Every wake-up of an idle staticlet costs far more CPU than
// a probe's exchange, so the probes of many containers share wake-ups:
// a probe's second run is up to probeGrid late, the others a period
// apart. It divides a second, so whole-second periods keep to the grid.
const probeGrid = 250 * time.Millisecond

// onGrid is t rounded up to the next grid instant from start.
func onGrid(start, t time.Time) time.Time {
	d := t.Sub(start)
	if d <= 0 {
		return start
	}
	return start.Add((d + probeGrid - 1) / probeGrid * probeGrid)
}

// probe runs the check once, when it may, and reports what changed. It
// tells whether to go on probing.
func (w *worker) probe(ctx context.Context, chk check) bool {
	if w.typ != pod.Startup && !w.c.started.Load() {
		// Startup gates liveness and readiness.
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, timeoutOf(w.spec))
	began := time.Now()
	warning, err := chk(pctx)
	took := time.Since(began)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	ok := err == nil
	if ran := w.m.cfg.Ran; ran != nil {
		r := pod.ProbeRun{Pod: w.key, Container: w.c.target.Container.Name, Type: w.typ, OK: ok, Took: took}
		if w.c.target.Pod != nil {
			r.UID = string(w.c.target.Pod.UID)
		}
		ran(r)
	}
	if ok == w.last && w.streak > 0 {
		w.streak++
	} else {
		w.last, w.streak = ok, 1
	}
	v := pod.ProbeVerdict{Pod: w.key, Container: w.c.target.Container.Name, ContainerID: w.c.target.ContainerID,
		Type: w.typ, Result: w.result, Warning: warning}
	if err != nil {
		v.Failed = err.Error()
	}
	threshold, outcome := thresholdOf(w.spec.FailureThreshold, 3), pod.ProbeFailure
	if ok {
		threshold, outcome = thresholdOf(w.spec.SuccessThreshold, 1), pod.ProbeSuccess
	}
	changed := false
	if w.streak >= threshold && w.result != outcome {
		w.result, v.Result, changed = outcome, outcome, true
	}
	if w.typ == pod.Startup && w.result == pod.ProbeSuccess {
		w.c.started.Store(true)
	}
	if changed || v.Failed != "" || v.Warning != "" {
		v.Time = time.Now()
		select {
		case w.m.out <- v:
		case <-ctx.Done():
			return false
		}
	}
	switch {
	case w.typ == pod.Startup && w.result == pod.ProbeSuccess:
		// Started for good: nothing more to probe.
		return false
	case w.typ != pod.Readiness && w.result == pod.ProbeFailure:
		// The container is killed; its successor has workers of its own.
		return false
	}
	return true
}

// thresholdOf is a probe threshold, def when unset.
func thresholdOf(n int32, def int) int {
	if n <= 0 {
		return def
	}
	return int(n)
}
