package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// defaultGrace is the grace period for a pod staticlet finds running but has
// no manifest for, such as one left by an earlier run whose file is gone.
const defaultGrace = 30 * time.Second

// sandboxGrace is how long the pause process gets: it exits on SIGTERM.
const sandboxGrace = 2 * time.Second

// minGraceAfterPreStop is the least time a container gets between its stop
// signal and SIGKILL once its preStop hook has run, however much of the
// grace period the hook used: the kubelet's minimum of 2 seconds.
const minGraceAfterPreStop = 2 * time.Second

// The status of a pod stopped for a node shutdown, in the kubelet's words
// (pkg/kubelet/nodeshutdown).
const (
	nodeShutdownReason  = "Terminated"
	nodeShutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// beginRemove starts a pass that terminates everything the pod has and
// deletes it. It ends with gone set once nothing of the pod is left.
func (c *podCore) beginRemove() []action {
	return c.wait(nil, atRemoveList, listPod{})
}

// removeListed stops everything the listing found.
func (c *podCore) removeListed(l listed) []action {
	if l.err != nil {
		return done(nil, 0, l.err)
	}
	var out []action
	if len(l.recs) > 0 {
		out = append(out, c.event(c.now, "", pod.EventNormal, "Killing", "Stopping pod: its manifest was removed"))
		out = c.reportTerminating(out, l.recs)
	}
	out = append(out, probe{}, watchFiles{})
	if len(l.recs) == 0 {
		return c.removeFiles(out, nil)
	}
	c.pass.recs = l.recs
	out = append(out, c.killing(l.recs)...)
	return c.wait(out, atRemoveStop, c.stopAll(l.recs, c.grace(), nil, true))
}

// removeStopped removes the files of what was stopped.
func (c *podCore) removeStopped(s stopped) []action {
	out, err := c.stoppedEvents(s)
	if err != nil {
		return done(out, 0, err)
	}
	return c.removeFiles(out, c.pass.recs)
}

// reportTerminating reports the pod being removed as the apiserver shows
// a deleted pod until its containers have stopped: its status as it is,
// with a deletion timestamp (now) and grace period, which `get pods` shows
// as Terminating. A pod whose spec this worker never had (found with no
// manifest after a restart) has no status to show.
func (c *podCore) reportTerminating(out []action, recs []pod.Record) []action {
	if c.last == nil {
		return out
	}
	v := newView(recs)
	sb, ok := v.current(c.last)
	if !ok && len(v.sandboxes) > 0 {
		sb = v.sandboxes[0]
	}
	st := c.status(c.last, v, sb)
	at := metav1.NewTime(c.now)
	grace := int64(c.grace() / time.Second)
	st.DeletionTimestamp, st.DeletionGracePeriodSeconds = &at, &grace
	return append(out, report{pod: st})
}

// removeFiles ends a remove pass: the files of the sandboxes of recs, and
// of those a pass before failed to remove, go; then the pod's status.
func (c *podCore) removeFiles(out []action, recs []pod.Record) []action {
	if c.filesLeft == nil {
		c.filesLeft = map[string]bool{}
	}
	for _, r := range recs {
		c.filesLeft[r.PodUID] = true
	}
	uids := make([]string, 0, len(c.filesLeft))
	for uid := range c.filesLeft {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	if len(uids) == 0 {
		return gone(out, nil)
	}
	c.pass.uids = uids
	return c.wait(out, atRemoveFiles, removeFiles{uids: uids, all: true})
}

// filesGone ends a remove pass once the files are removed, or not.
func (c *podCore) filesGone(fr filesRemoved) []action {
	var errs []error
	for _, uid := range fr.done {
		delete(c.filesLeft, uid)
	}
	for _, uid := range c.pass.uids {
		if err := fr.failed[uid]; err != nil {
			errs = append(errs, fmt.Errorf("removing the files of pod %s: %w", c.key, err))
		}
	}
	return gone(nil, errors.Join(errs...))
}

// gone ends a remove pass: the pod is gone unless err.
func gone(out []action, err error) []action {
	return append(out, forget{}, finish{err: err, gone: err == nil})
}

// beginHalt starts a pass that stops every container of the pod for a node
// shutdown, each within limit at most, keeping their records for the
// status, and reports the pod as terminated by the node shutdown.
func (c *podCore) beginHalt(limit time.Duration) []action {
	c.halted = true
	c.pass.p, c.pass.limit = c.desired, limit
	return c.wait(nil, atHaltList, listPod{})
}

// haltListed stops what the listing found.
func (c *podCore) haltListed(l listed) []action {
	if l.err != nil {
		return done(nil, 0, fmt.Errorf("listing the containers of pod %s for the node shutdown: %w", c.key, l.err))
	}
	p := c.pass.p
	out := []action{probe{}, watchFiles{}}
	grace := c.grace()
	if p != nil {
		grace = podGrace(p)
		out = append(out, c.event(c.now, "", pod.EventNormal, "NodeShutdown", nodeShutdownMessage))
	}
	grace = min(grace, c.pass.limit)
	out = append(out, c.killing(l.recs)...)
	return c.wait(out, atHaltStop, c.stopAll(l.recs, grace, p, false))
}

// haltStopped lists the pod again to report it, unless it is being
// removed: it goes, and has no status to report.
func (c *podCore) haltStopped(s stopped) []action {
	out, err := c.stoppedEvents(s)
	if err != nil {
		err = fmt.Errorf("stopping pod %s for the node shutdown: %w", c.key, err)
	}
	if c.pass.p == nil {
		return done(out, 0, err)
	}
	c.pass.err = err
	return c.wait(out, atHaltReport, listPod{})
}

// haltReported ends a halt pass with the pod reported as terminated by
// the node shutdown.
func (c *podCore) haltReported(l listed) []action {
	p, err := c.pass.p, c.pass.err
	if l.err != nil {
		return done(nil, 0, errors.Join(err, fmt.Errorf("listing the containers of pod %s for the node shutdown: %w", c.key, l.err)))
	}
	v := newView(l.recs)
	sb, _ := v.current(p)
	st := buildPod(statusInput{pod: p, view: v, sandbox: sb, waiting: c.mem.waiting, hostIPs: c.hostIPs, now: c.now})
	shutDownStatus(&st.Status, c.now)
	return done(c.reportStatus(nil, st), 0, err)
}

// stopAll stops recs, each with grace (which its preStop hook shares; p,
// if not nil, is the pod being synced, where their specs may be): the app
// containers, then the init containers (sidecars outlive the app they
// serve), then the sandboxes, which get sandboxGrace; and removes them if
// remove is set. A replacement never overlaps with what it replaces: the
// group ends when every process is gone.
func (c *podCore) stopAll(recs []pod.Record, grace time.Duration, p *pod.Pod, remove bool) stopGroup {
	g := stopGroup{remove: remove}
	for _, r := range recs {
		if r.Kind == pod.KindSandbox {
			g.stops = append(g.stops, stopOrder{rec: r, grace: sandboxGrace})
			continue
		}
		g.stops = append(g.stops, c.stopOrder(r, grace, p))
	}
	return g
}

// killing is the events that tell of recs' running containers being
// stopped, the app containers first.
func (c *podCore) killing(recs []pod.Record) []action {
	var out []action
	for _, kind := range []pod.ContainerKind{pod.KindApp, pod.KindInit} {
		for _, r := range recs {
			if r.Kind == kind && r.State == pod.TaskRunning {
				out = append(out, c.event(c.now, r.Name, pod.EventNormal, "Killing", fmt.Sprintf("Stopping container %s", r.Name)))
			}
		}
	}
	return out
}

// stopOrder is the order to stop r with grace: its preStop hook first,
// when the spec it was started from has one and it runs. grace bounds the
// two together, as with the kubelet.
func (c *podCore) stopOrder(r pod.Record, grace time.Duration, p *pod.Pod) stopOrder {
	o := stopOrder{rec: r, grace: grace}
	if r.Kind == pod.KindSandbox || r.State != pod.TaskRunning || grace <= 0 {
		return o
	}
	if req, ok := c.requestFor(r, p); ok && req.Container.Lifecycle != nil && req.Container.Lifecycle.PreStop != nil {
		o.hook, o.req = req.Container.Lifecycle.PreStop, req
	}
	return o
}

// stoppedEvents turns the outcome of a stopGroup into its events (a
// preStop hook that failed) and its error.
func (c *podCore) stoppedEvents(s stopped) ([]action, error) {
	var out []action
	for _, f := range s.hookFailed {
		out = append(out, c.event(c.now, f.container, pod.EventWarning, "FailedPreStopHook", f.msg))
	}
	return out, s.err
}

// requestFor finds the spec container r was started from, by name and
// hash, in p or in the pod as last specified; false when neither has it
// (a container of a pod staticlet has not seen since it started).
func (c *podCore) requestFor(r pod.Record, p *pod.Pod) (pod.ContainerRequest, bool) {
	// The pod r was started for, by UID, comes first: its pod-level
	// settings (hostNetwork) are the ones r runs with.
	cands := []*pod.Pod{p, c.last}
	if c.last != nil && string(c.last.UID) == r.PodUID {
		cands[0], cands[1] = c.last, p
	}
	for _, cand := range cands {
		if cand == nil {
			continue
		}
		for _, cs := range [][]v1.Container{cand.Spec.InitContainers, cand.Spec.Containers} {
			for i := range cs {
				if cs[i].Name == r.Name && pod.ContainerHash(&cs[i]) == r.Hash {
					return pod.ContainerRequest{Pod: cand, Sandbox: pod.Record{ID: r.SandboxID, PodUID: r.PodUID},
						Container: &cs[i], Kind: r.Kind, Attempt: r.Attempt}, true
				}
			}
		}
	}
	return pod.ContainerRequest{}, false
}

// podGrace is p's termination grace period.
func podGrace(p *pod.Pod) time.Duration {
	if p != nil && p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}

// shutDownStatus marks st as the status of a pod the node shutdown
// terminated, as the kubelet does: phase Failed, its reason and message,
// and a DisruptionTarget condition.
func shutDownStatus(st *v1.PodStatus, now time.Time) {
	st.Phase = v1.PodFailed
	st.Reason = nodeShutdownReason
	st.Message = nodeShutdownMessage
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.PodReady || st.Conditions[i].Type == v1.ContainersReady {
			st.Conditions[i].Status = v1.ConditionFalse
			st.Conditions[i].Reason = "PodCompleted"
		}
	}
	st.Conditions = append(st.Conditions, v1.PodCondition{
		Type:               v1.DisruptionTarget,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             v1.PodReasonTerminationByKubelet,
		Message:            nodeShutdownMessage,
	})
}
