package reconcile

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// statusInput is what a pod's status is computed from.
type statusInput struct {
	pod     *pod.Pod
	view    view
	sandbox pod.Record // the current sandbox; zero before it exists
	// sandboxDown is why the sandbox is not running, when it failed.
	sandboxDown waitingState
	waiting     map[string]waitingState
	hostIPs     []string
	now         time.Time
	probes      map[string]probeState // probe results by container ID
}

// buildPod returns the desired pod with its status as the kubelet would
// compute it from what the runtime reports. It is pure.
func buildPod(in statusInput) *v1.Pod {
	p := in.pod.DeepCopy()
	sb := in.sandbox
	st := v1.PodStatus{QOSClass: pod.QOSClass(&p.Spec)}
	addresses(&st, p, sb, in.hostIPs)
	policy := p.Spec.RestartPolicy
	var regularInits []v1.ContainerStatus // init containers that are not sidecars
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		ip := initPolicy(policy)
		if isSidecar(c) {
			ip = v1.RestartPolicyAlways
		}
		cs := containerStatus(c, in.view.in(sb.ID, c.Name), in.waiting[c.Name], ip, sb.ID == "")
		if isSidecar(c) {
			probedStatus(&cs, c, in.probes[strings.TrimPrefix(cs.ContainerID, "containerd://")])
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if !isSidecar(c) {
			regularInits = append(regularInits, cs)
		}
	}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		cs := containerStatus(c, in.view.in(sb.ID, c.Name), in.waiting[c.Name], policy, sb.ID == "")
		probedStatus(&cs, c, in.probes[strings.TrimPrefix(cs.ContainerID, "containerd://")])
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	initialized := initializedFrom(p.Spec.InitContainers, st.InitContainerStatuses, st.ContainerStatuses)
	if initialized {
		// App containers run only after every init container succeeded; one
		// whose record is gone (removed while staticlet was stopped, say)
		// completed.
		for i := range st.InitContainerStatuses {
			if cs := &st.InitContainerStatuses[i]; cs.ContainerID == "" && !isSidecar(&p.Spec.InitContainers[i]) {
				cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}
			}
		}
	}
	st.Phase = phase(policy, initialized, regularInits, st.ContainerStatuses)
	ready := st.Phase == v1.PodRunning
	for _, cs := range st.ContainerStatuses {
		ready = ready && cs.Ready
	}
	now := metav1.NewTime(in.now)
	cond := func(t v1.PodConditionType, ok bool, reason string) v1.PodCondition {
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, LastTransitionTime: now, Reason: reason}
		if ok {
			c.Status, c.Reason = v1.ConditionTrue, ""
		}
		return c
	}
	sandboxUp := sb.ID != "" && sb.State == pod.TaskRunning
	sandboxCond := cond(v1.PodReadyToStartContainers, sandboxUp, "")
	if !sandboxUp {
		sandboxCond.Reason, sandboxCond.Message = in.sandboxDown.reason, in.sandboxDown.message
	}
	st.Conditions = []v1.PodCondition{
		sandboxCond,
		cond(v1.PodInitialized, initialized, "ContainersNotInitialized"),
		cond(v1.PodReady, ready, "ContainersNotReady"),
		cond(v1.ContainersReady, ready, "ContainersNotReady"),
		cond(v1.PodScheduled, true, ""),
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		st.Conditions[2].Reason, st.Conditions[3].Reason = "PodCompleted", "PodCompleted"
	}
	capMessages(&st, len(p.Spec.Containers)+len(p.Spec.InitContainers))
	p.Status = st
	return p
}

// addresses sets the host's and the pod's addresses in st, and when the
// pod started: when its sandbox was made.
func addresses(st *v1.PodStatus, p *v1.Pod, sb pod.Record, hostIPs []string) {
	if len(hostIPs) > 0 {
		st.HostIP = hostIPs[0]
		if p.Spec.HostNetwork {
			st.PodIP = hostIPs[0]
		}
	}
	for _, ip := range hostIPs {
		st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
		if p.Spec.HostNetwork {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}
	if !p.Spec.HostNetwork && len(sb.IPs) > 0 {
		st.PodIP = sb.IPs[0]
		for _, ip := range sb.IPs {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}
	if sb.ID != "" {
		t := metav1.NewTime(sb.CreatedAt)
		st.StartTime = &t
	}
}

// maxPodMessageBytes bounds the termination messages of a pod, shared
// evenly among its containers: the kubelet's
// MaxPodTerminationMessageLogLength.
const maxPodMessageBytes = 12 * 1024

// capMessages cuts each termination message in st to its container's
// share of maxPodMessageBytes, keeping its beginning, as the kubelet's
// status manager does.
func capMessages(st *v1.PodStatus, containers int) {
	limit := maxPodMessageBytes / max(containers, 1)
	cut := func(t *v1.ContainerStateTerminated) {
		if t != nil && len(t.Message) > limit {
			t.Message = t.Message[:limit]
		}
	}
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			cut(list[i].State.Terminated)
			cut(list[i].LastTerminationState.Terminated)
		}
	}
}

// containerStatus describes container c from its records (newest first).
func containerStatus(c *v1.Container, recs []pod.Record, w waitingState, policy v1.RestartPolicy, noSandbox bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	if len(recs) == 0 {
		reason := "ContainerCreating"
		if w.reason != "" {
			reason = w.reason
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: w.message}
		return cs
	}
	last := recs[0]
	cs.AllocatedResourcesStatus = deviceStatus(last.Devices)
	cs.ContainerID = "containerd://" + last.ID
	cs.ImageID = last.ImageID
	cs.RestartCount = int32(last.Attempt)
	switch last.State {
	case pod.TaskRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(last.StartedAt)}
		started := true
		cs.Started = &started
		cs.Ready = true
		if len(recs) > 1 && recs[1].State == pod.TaskExited {
			cs.LastTerminationState.Terminated = terminated(recs[1])
		}
	case pod.TaskExited:
		f := false
		cs.Started = &f
		if restarts(policy, last.ExitCode) && w.reason != "" && !noSandbox {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.reason, Message: w.message}
			cs.LastTerminationState.Terminated = terminated(last)
		} else {
			cs.State.Terminated = terminated(last)
			if len(recs) > 1 && recs[1].State == pod.TaskExited {
				cs.LastTerminationState.Terminated = terminated(recs[1])
			}
		}
	default:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	return cs
}

// deviceStatus tells of the CDI devices a container holds by its
// limits, by kind, as core/v1 reports a container's devices. CDI says nothing of a
// device's health: it is Unknown.
func deviceStatus(devices []string) []v1.ResourceStatus {
	var out []v1.ResourceStatus
	for _, d := range slices.Sorted(slices.Values(devices)) {
		kind := v1.ResourceName(pod.DeviceKind(d))
		if len(out) == 0 || out[len(out)-1].Name != kind {
			out = append(out, v1.ResourceStatus{Name: kind})
		}
		last := &out[len(out)-1]
		last.Resources = append(last.Resources, v1.ResourceHealth{ResourceID: v1.ResourceID(d), Health: v1.ResourceHealthStatusUnknown})
	}
	return out
}

func terminated(r pod.Record) *v1.ContainerStateTerminated {
	reason, message := "Completed", r.Message
	switch {
	case r.Lost:
		reason = "ContainerStatusUnknown"
	case r.Evicted != "":
		// Killed over an ephemeral storage limit: the kubelet's reason
		// and message, as it puts them on the pod it evicts.
		reason, message = "Evicted", r.Evicted
	case r.OOMKilled:
		reason = "OOMKilled"
	case r.ExitCode != 0:
		reason = "Error"
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    r.ExitCode,
		Reason:      reason,
		Message:     message,
		StartedAt:   metav1.NewTime(r.StartedAt),
		FinishedAt:  metav1.NewTime(r.FinishedAt),
		ContainerID: "containerd://" + r.ID,
	}
}

// initializedFrom tells whether every init container succeeded (a sidecar:
// runs), or app containers have already been started.
func initializedFrom(inits []v1.Container, initStatuses, apps []v1.ContainerStatus) bool {
	for _, cs := range apps {
		if cs.ContainerID != "" {
			return true
		}
	}
	for i, cs := range initStatuses {
		if isSidecar(&inits[i]) {
			if cs.State.Running == nil {
				return false
			}
		} else if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			return false
		}
	}
	return true
}

// phase follows the kubelet's rules for a pod's phase.
func phase(policy v1.RestartPolicy, initialized bool, inits, apps []v1.ContainerStatus) v1.PodPhase {
	if !initialized {
		for _, cs := range inits {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && policy == v1.RestartPolicyNever {
				return v1.PodFailed
			}
		}
		return v1.PodPending
	}
	var running, waitingNew, stopped, succeeded, failed int
	for _, cs := range apps {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			// Restarting after an exit: it has run.
			running++
		default:
			waitingNew++
		}
	}
	switch {
	case waitingNew > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped == len(apps) && len(apps) > 0:
		switch {
		case policy == v1.RestartPolicyAlways:
			return v1.PodRunning
		case policy == v1.RestartPolicyOnFailure && failed > 0:
			return v1.PodRunning
		case failed > 0:
			return v1.PodFailed
		default:
			return v1.PodSucceeded
		}
	}
	return v1.PodPending
}
