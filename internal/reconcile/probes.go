package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Prober runs the probes of running containers. Set makes the probes of
// pod key run for exactly targets; it is idempotent and cheap when nothing
// changed. Its verdicts come back to Run on a channel.
type Prober interface {
	Set(key pod.Key, targets []pod.ProbeTarget)
}

// noProber runs no probe: containers count as started and, without a
// readiness probe, ready.
type noProber struct{}

func (noProber) Set(pod.Key, []pod.ProbeTarget) {}

// probeState is what the probes of one container (by ID) last decided.
type probeState struct {
	liveness, readiness, startup pod.ProbeResult
}

// noteProbe records verdict v and tells whether it changed a result.
// Called by the reconciler's loop.
func (w *worker) noteProbe(v pod.ProbeVerdict) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.probes[v.ContainerID]
	var cur *pod.ProbeResult
	switch v.Type {
	case pod.Liveness:
		cur = &ps.liveness
	case pod.Readiness:
		cur = &ps.readiness
	case pod.Startup:
		cur = &ps.startup
	default:
		return false
	}
	if *cur == v.Result {
		return false
	}
	*cur = v.Result
	w.probes[v.ContainerID] = ps
	return true
}

// probeEvents turns verdict v into the events the kubelet records for it.
func probeEvents(v pod.ProbeVerdict) []pod.Event {
	var out []pod.Event
	if v.Failed != "" {
		out = append(out, pod.Event{Time: v.Time, Pod: v.Pod.String(), Container: v.Container, Type: pod.EventWarning,
			Reason: "Unhealthy", Message: fmt.Sprintf("%s probe failed: %s", v.Type, v.Failed)})
	}
	if v.Warning != "" {
		out = append(out, pod.Event{Time: v.Time, Pod: v.Pod.String(), Container: v.Container, Type: pod.EventWarning,
			Reason: "ProbeWarning", Message: fmt.Sprintf("%s probe warning: %s", v.Type, v.Warning)})
	}
	return out
}

// probeSnapshot copies the probe results for a status report.
func (w *worker) probeSnapshot() map[string]probeState {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]probeState, len(w.probes))
	for id, ps := range w.probes {
		out[id] = ps
	}
	return out
}

// unhealthy tells which probe, liveness or startup, failed for good for
// container id; empty when none did.
func (w *worker) unhealthy(id string) pod.ProbeType {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps, ok := w.probes[id]
	switch {
	case !ok:
		return ""
	case ps.startup == pod.ProbeFailure:
		return pod.Startup
	case ps.liveness == pod.ProbeFailure:
		return pod.Liveness
	}
	return ""
}

// killUnhealthy stops running container r of c, whose liveness or startup
// probe failed, with the probe's grace period, else the pod's, as the
// kubelet does; its restart policy then decides on a restart.
func (w *worker) killUnhealthy(ctx context.Context, p *pod.Pod, c *v1.Container, r pod.Record, typ pod.ProbeType) error {
	pr := c.LivenessProbe
	if typ == pod.Startup {
		pr = c.StartupProbe
	}
	grace := podGrace(p)
	if pr != nil && pr.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pr.TerminationGracePeriodSeconds) * time.Second
	}
	w.event(c.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(string(typ))))
	w.probeKilled[r.ID] = true
	if err := w.stopContainer(ctx, r, grace, p); err != nil {
		return fmt.Errorf("stopping container %q of pod %s after its %s probe failed: %w", c.Name, p, strings.ToLower(string(typ)), err)
	}
	return nil
}

// setProbes hands the prober the running containers of sandbox sb that
// have probes, and forgets the results of containers no longer running.
func (w *worker) setProbes(p *pod.Pod, v view, sb pod.Record) {
	var targets []pod.ProbeTarget
	live := map[string]bool{}
	// Probes reach the pod at its address; without one (hostNetwork, or
	// no pod network), at 127.0.0.1 on the host or in its namespace.
	podIP := ""
	if len(sb.IPs) > 0 && !p.Spec.HostNetwork {
		podIP = sb.IPs[0]
	}
	add := func(c *v1.Container) {
		r := v.latest(sb.ID, c.Name)
		if r == nil || r.State != pod.TaskRunning || r.Hash != pod.ContainerHash(c) {
			return
		}
		live[r.ID] = true
		if c.LivenessProbe == nil && c.ReadinessProbe == nil && c.StartupProbe == nil {
			return
		}
		targets = append(targets, pod.ProbeTarget{Pod: p, Container: c, ContainerID: r.ID, SandboxID: sb.ID, PodIP: podIP,
			StartedAt: r.StartedAt})
	}
	if sb.ID != "" && sb.State != pod.TaskExited {
		for i := range p.Spec.InitContainers {
			if c := &p.Spec.InitContainers[i]; isSidecar(c) {
				add(c)
			}
		}
		for i := range p.Spec.Containers {
			add(&p.Spec.Containers[i])
		}
	}
	w.prober.Set(w.key, targets)
	w.mu.Lock()
	for id := range w.probes {
		if !live[id] {
			delete(w.probes, id)
		}
	}
	w.mu.Unlock()
	for id := range w.probeKilled {
		if v.byID(id) == nil {
			delete(w.probeKilled, id)
		}
	}
}

// probedStatus applies probe results to the status of container c, which
// is running as r: started once its startup probe succeeded (or it has
// none), ready once started and its readiness probe succeeded (or it has
// none).
func probedStatus(cs *v1.ContainerStatus, c *v1.Container, ps probeState) {
	if cs.State.Running == nil {
		return
	}
	started := c.StartupProbe == nil || ps.startup == pod.ProbeSuccess
	cs.Started = &started
	cs.Ready = started && (c.ReadinessProbe == nil || ps.readiness == pod.ProbeSuccess)
}
