package reconcile

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// probeState is what the probes of one container (by ID) last decided.
type probeState struct {
	liveness, readiness, startup pod.ProbeResult
}

// noteProbe records verdict v and tells whether it changed a result.
func (c *podCore) noteProbe(v pod.ProbeVerdict) bool {
	ps := c.probes.results[v.ContainerID]
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
	c.probes.results[v.ContainerID] = ps
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

// unhealthy tells which probe, liveness or startup, failed for good for
// container id; empty when none did.
func (c *podCore) unhealthy(id string) pod.ProbeType {
	ps, ok := c.probes.results[id]
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

// started tells whether container ctr, running as id, counts as started:
// it has no startup probe, or that probe succeeded.
func (c *podCore) started(ctr *v1.Container, id string) bool {
	return ctr.StartupProbe == nil || c.probes.results[id].startup == pod.ProbeSuccess
}

// setProbes hands the prober the running containers of sandbox sb that
// have probes, and forgets the results of containers no longer running.
func (c *podCore) setProbes(out []action, p *pod.Pod, v view, sb pod.Record) []action {
	var targets []pod.ProbeTarget
	live := map[string]bool{}
	// Probes reach the pod at its address; without one (hostNetwork, or
	// no pod network), at 127.0.0.1 on the host or in its namespace.
	podIP := ""
	if len(sb.IPs) > 0 && !p.Spec.HostNetwork {
		podIP = sb.IPs[0]
	}
	add := func(ctr *v1.Container) {
		r := v.latest(sb.ID, ctr.Name)
		if r == nil || r.State != pod.TaskRunning || r.Hash != pod.ContainerHash(ctr) {
			return
		}
		live[r.ID] = true
		if ctr.LivenessProbe == nil && ctr.ReadinessProbe == nil && ctr.StartupProbe == nil {
			return
		}
		targets = append(targets, pod.ProbeTarget{Pod: p, Container: ctr, ContainerID: r.ID, SandboxID: sb.ID, PodIP: podIP,
			StartedAt: r.StartedAt})
	}
	if sb.ID != "" && sb.State != pod.TaskExited {
		for i := range p.Spec.InitContainers {
			if ctr := &p.Spec.InitContainers[i]; isSidecar(ctr) {
				add(ctr)
			}
		}
		for i := range p.Spec.Containers {
			add(&p.Spec.Containers[i])
		}
	}
	for id := range c.probes.results {
		if !live[id] {
			delete(c.probes.results, id)
		}
	}
	for id := range c.probes.killed {
		if v.byID(id) == nil {
			delete(c.probes.killed, id)
		}
	}
	return append(out, probe{targets: targets})
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
