package reconcile

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// One container's steps, in the order a start takes them: keep
// (plan_converge.go) decides, apply takes the decision, start checks the
// image (imageChecked), pulls it when it must (pullReported, pulledImage),
// starts the container (startNow, startedOne) and runs its postStart hook
// (running, postStart, hookRan); applied then hands back to kept, which
// goes on to the next container. A replaced container is stopped and
// removed first (stopOne, oneStopped, oneRemoved); one a restart, a file
// change or a failed probe stops goes back through restarted.

// containerWork is the container a convergePass keeps, and what it
// learnt of it so far in the pass.
type containerWork struct {
	ctr  *v1.Container
	kind pod.ContainerKind
	st   step // what decideContainer decided for it
	// req is the start under way, and rec the container it started.
	req pod.ContainerRequest
	rec pod.Record
	// stop is why the container is being stopped; why says it in the
	// error when the stop fails; hookErr is the failure of its postStart
	// hook, for stopHookFailed.
	stop    stopFor
	why     string
	hookErr error
}

// stopFor is why one container is stopped, which decides what follows.
type stopFor int

const (
	stopToReplace  stopFor = iota // its spec changed: removed, then started anew
	stopToRestart                 // a restart asked, a file changed, a probe failed: its policy restarts it
	stopHookFailed                // its postStart hook failed: its policy decides, at the next look
)

// apply takes step cur.st for the current container: a container replaced
// is stopped after its preStop hook, and a container started counts as
// started once its postStart hook has returned. applied gets what went
// wrong.
func (g *convergePass) apply(out []action) []action {
	c, ctr, st := g.c, g.cur.ctr, g.cur.st
	switch st.kind {
	case stepNone, stepWait:
		return g.applied(out, nil)
	case stepReplace:
		out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s definition changed, will be restarted", ctr.Name)))
		old := pod.Record{ID: st.id, Name: ctr.Name, Kind: g.cur.kind}
		if r := g.v.byID(st.id); r != nil {
			old = *r
		}
		return g.stopOne(out, old, c.replaceGrace(g.p), g.p, stopToReplace, "")
	case stepClear:
		// Finished, not replaced: a start an earlier staticlet left under
		// way may still run it, and a second container would then run the
		// process twice.
		return c.wait(out, atConvResume, resumeContainer{id: st.id})
	}
	return g.start(out)
}

// stopOne stops container r, started from a spec of p or of the pod as
// last specified, after its preStop hook, for the reason stop; why says
// it in the error if the stop fails.
func (g *convergePass) stopOne(out []action, r pod.Record, grace time.Duration, p *pod.Pod, stop stopFor, why string) []action {
	g.cur.stop, g.cur.why = stop, why
	return g.c.wait(out, atConvStopOne, stopGroup{stops: []stopOrder{g.c.stopOrder(r, grace, p)}, sequential: true})
}

// oneStopped goes on from the stop of the current container as its
// reason says.
func (g *convergePass) oneStopped(s stopped) []action {
	c, w := g.c, &g.cur
	out, err := c.stoppedEvents(s)
	switch w.stop {
	case stopToReplace:
		if err != nil {
			return g.applied(out, err)
		}
		return c.wait(out, atConvRemoveOne, removeContainer{id: w.st.id})
	case stopHookFailed:
		if err != nil {
			return g.applied(out, fmt.Errorf("stopping container %q of pod %s %s: %w", w.ctr.Name, w.req.Pod, w.why, err))
		}
		return g.applied(out, &retryLater{at: c.now, err: fmt.Errorf("postStart hook of container %q of pod %s: %w", w.ctr.Name, w.req.Pod, w.hookErr)})
	}
	if err != nil {
		err = fmt.Errorf("stopping container %q of pod %s %s: %w", w.ctr.Name, g.p, w.why, err)
	}
	return g.restarted(out, err)
}

// oneRemoved starts the current container anew once the old one is
// removed.
func (g *convergePass) oneRemoved(r removed) []action {
	if r.err != nil {
		return g.applied(nil, r.err)
	}
	if g.cur.st.kind == stepReplace {
		// The new spec starts without the old one's backoff.
		delete(g.c.mem.streaks, g.cur.ctr.Name)
	}
	return g.start(nil)
}

// resumedOne goes on from a start an earlier staticlet left under way:
// one that cannot be finished is removed and started anew.
func (g *convergePass) resumedOne(r resumed) []action {
	if r.err != nil {
		return g.c.wait(nil, atConvRemoveOne, removeContainer{id: g.cur.st.id})
	}
	if r.rec.State != pod.TaskRunning {
		return g.applied(nil, nil) // it ran and exited: the next pass decides
	}
	req := pod.ContainerRequest{Pod: g.p, Sandbox: g.sb, Container: g.cur.ctr, Kind: g.cur.kind, Attempt: r.rec.Attempt}
	return g.running(nil, r.rec, req)
}

// start starts the current container, its image pulled first when its
// policy says: ensuring the image begins with a check.
func (g *convergePass) start(out []action) []action {
	c, ctr := g.c, g.cur.ctr
	if c.halted || c.order.leaving {
		// The node is shutting down, or the pod's manifest is gone:
		// nothing starts, and the halt or the removal stops what runs.
		return g.applied(out, &retryLater{at: c.now})
	}
	if retry := c.mem.failedStarts(g.p, ctr).retryAt; retry.After(c.now) {
		return g.applied(out, &retryLater{at: retry})
	}
	return c.wait(out, atConvCheckImage, checkImage{c: ctr})
}

// imageChecked pulls the current container's image when its pull policy
// says so. While the pull runs the pod is reported with the container
// waiting in ContainerCreating and a Pulling event, as the kubelet shows
// it; the pull holds up only this pod.
func (g *convergePass) imageChecked(ic imageChecked) []action {
	c, ctr := g.c, g.cur.ctr
	if ic.err != nil {
		return g.notStarted(nil, ic.err)
	}
	if !ic.need {
		var out []action
		if ctr.ImagePullPolicy != v1.PullNever {
			// The kubelet's message, and where the image was taken
			// from when that is not the runtime's own store.
			msg := fmt.Sprintf("Container image %q already present on machine", ctr.Image)
			if ic.from != "" {
				msg += fmt.Sprintf(" (taken from containerd namespace %q, no pull)", ic.from)
			}
			out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Pulled", msg))
		}
		return g.startNow(out)
	}
	// Keep the failure count for the backoff; the last failure's
	// message goes, so the next failure is told as an event again.
	failed := c.mem.failedStarts(g.p, ctr)
	c.mem.waiting[ctr.Name] = waitingState{reason: "ContainerCreating", failures: failed.failures, hash: failed.hash}
	return c.relist(nil, atConvPullReport, g.sb)
}

// pullReported pulls the image once the pod is reported waiting for it.
// The report is only for the status shown during the pull: a failed
// listing leaves the previous one, and the pass's own report follows.
func (g *convergePass) pullReported(l listed) []action {
	c, ctr := g.c, g.cur.ctr
	out, _ := c.relisted(l)
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Pulling", fmt.Sprintf("Pulling image %q", ctr.Image)))
	return c.wait(out, atConvPull, pullImage{c: ctr})
}

// pulledImage starts the current container once its image is pulled.
func (g *convergePass) pulledImage(pl pulled) []action {
	c, ctr := g.c, g.cur.ctr
	switch {
	case pl.err == nil:
		return g.startNow([]action{c.event(c.now, ctr.Name, pod.EventNormal, "Pulled",
			fmt.Sprintf("Successfully pulled image %q in %s", ctr.Image, pl.took.Round(time.Millisecond)))})
	case pl.present:
		// Policy Always on a node that cannot reach the registry: run
		// what the node has rather than nothing.
		return g.startNow([]action{
			c.event(c.now, ctr.Name, pod.EventWarning, "Failed", fmt.Sprintf("%v; using the image already present", pl.err)),
			note{warn: true, msg: "pull failed; using the image already present", args: []any{"image", ctr.Image, "err", pl.err}},
		})
	}
	return g.notStarted(nil, pl.err)
}

// startNow starts the current container, its image present, unless a
// node shutdown or the end of its manifest came while the image was
// checked or pulled.
func (g *convergePass) startNow(out []action) []action {
	c, ctr := g.c, g.cur.ctr
	if c.halted || c.order.leaving {
		return g.applied(out, &retryLater{at: c.now})
	}
	attempt := max(g.cur.st.attempt, c.mem.attempts[ctr.Name])
	g.cur.req = pod.ContainerRequest{Pod: g.p, Sandbox: g.sb, Container: ctr, Kind: g.cur.kind, Attempt: attempt}
	return c.wait(out, atConvStart, startContainer{req: g.cur.req})
}

// startedOne goes on from the start of the current container.
func (g *convergePass) startedOne(s started) []action {
	if s.err != nil {
		return g.notStarted(nil, s.err)
	}
	return g.running(nil, s.rec, g.cur.req)
}

// notStarted records that the current container could not start for err.
func (g *convergePass) notStarted(out []action, err error) []action {
	out, err = g.c.startFailed(out, g.p, g.cur.ctr, err)
	return g.applied(out, err)
}

// running tells that container rec, started for req, runs, and runs its
// postStart hook if it has one.
func (g *convergePass) running(out []action, rec pod.Record, req pod.ContainerRequest) []action {
	c, ctr := g.c, req.Container
	delete(c.mem.waiting, ctr.Name)
	delete(c.mem.attempts, ctr.Name)
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Started", fmt.Sprintf("Started container %s (%s)", ctr.Name, shortID(rec.ID))))
	if ctr.Lifecycle == nil || ctr.Lifecycle.PostStart == nil {
		return g.applied(out, nil)
	}
	return g.postStart(out, rec, req)
}

// postStart runs the postStart hook of container rec, just started for
// req, as the kubelet does: until it returns the container does not count
// as started.
func (g *convergePass) postStart(out []action, rec pod.Record, req pod.ContainerRequest) []action {
	g.c.hook = &runningHook{pod: req.Pod, container: req.Container}
	g.cur.rec, g.cur.req = rec, req
	return g.c.wait(out, atConvPostStart, postStart{rec: rec, req: req})
}

// hookRan goes on once the postStart hook returned. A failed hook is a
// FailedPostStartHook event, and the container is stopped (its preStop
// hook included) so that its restart policy decides what follows; applied
// then gets a retryLater for the next look. A hook made pointless by a
// new spec is abandoned.
func (g *convergePass) hookRan(h hookRan) []action {
	c, req := g.c, g.cur.req
	c.hook = nil
	ctr := req.Container
	switch {
	case h.err == nil:
		return g.applied(nil, nil)
	case h.abandoned:
		// The spec changed under the hook, or the node is shutting
		// down: the next look replaces or removes the container, or
		// the halt stops it.
		why := "the pod changed"
		if c.halted {
			why = "the node is shutting down"
		}
		return g.applied([]action{note{msg: "postStart hook abandoned: " + why, args: []any{"container", ctr.Name}}}, &retryLater{at: c.now})
	}
	out := []action{
		c.event(c.now, ctr.Name, pod.EventWarning, "FailedPostStartHook", h.msg),
		c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s failed post-start hook, will be killed", ctr.Name)),
	}
	g.cur.hookErr = h.err
	return g.stopOne(out, g.cur.rec, podGrace(req.Pod), req.Pod, stopHookFailed, "after its postStart hook failed")
}

// killUnhealthy stops running container r of ctr, whose liveness or
// startup probe failed, with the probe's grace period, else the pod's, as
// the kubelet does; its restart policy then decides on a restart.
func (g *convergePass) killUnhealthy(out []action, ctr *v1.Container, r pod.Record, typ pod.ProbeType) []action {
	c, p := g.c, g.p
	pr := ctr.LivenessProbe
	if typ == pod.Startup {
		pr = ctr.StartupProbe
	}
	grace := podGrace(p)
	if pr != nil && pr.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pr.TerminationGracePeriodSeconds) * time.Second
	}
	kind := strings.ToLower(string(typ))
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s failed %s probe, will be restarted", ctr.Name, kind)))
	c.probes.killed[r.ID] = true
	return g.stopOne(out, r, grace, p, stopToRestart, fmt.Sprintf("after its %s probe failed", kind))
}

// restartChanged stops running container r of ctr, a file it mounts
// (path) having changed, with the pod's grace period; it restarts as after
// a failed liveness probe: unless its restart policy is Never.
func (g *convergePass) restartChanged(out []action, ctr *v1.Container, r pod.Record, path string) []action {
	c, p := g.c, g.p
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing",
		fmt.Sprintf("Container %s: the content of %s, which it mounts, changed (%s); it will be restarted", ctr.Name, path, pod.AnnotationRestartOnChange)))
	c.probes.killed[r.ID] = true
	return g.stopOne(out, r, podGrace(p), p, stopToRestart, fmt.Sprintf("after %s changed", path))
}

// startFailed records why container ctr could not start, and when to try
// again: failed starts back off like crashes, so that a missing image is
// not pulled again every second. The error it returns is a retryLater.
func (c *podCore) startFailed(out []action, p *pod.Pod, ctr *v1.Container, err error) ([]action, error) {
	reason := pod.WaitingReason(err, "CreateContainerError")
	cur := c.mem.failedStarts(p, ctr)
	if cur.message != err.Error() {
		out = append(out, c.event(c.now, ctr.Name, pod.EventWarning, "Failed", err.Error()))
	}
	failures := cur.failures + 1
	retry := c.now.Add(c.backoff.Delay(failures))
	if reason == "ErrImagePull" && failures > 1 {
		reason = "ImagePullBackOff"
		out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", ctr.Image)))
	}
	c.mem.waiting[ctr.Name] = waitingState{reason: reason, message: err.Error(), failures: failures, retryAt: retry, hash: startHash(p, ctr, reason)}
	return out, &retryLater{at: retry, err: fmt.Errorf("starting container %q of pod %s: %w", ctr.Name, p, err)}
}

// waitingBackOff records that container name waits in CrashLoopBackOff and
// says so once per restart.
func (c *podCore) waitingBackOff(out []action, p *pod.Pod, name string, until, now time.Time) []action {
	msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", until.Sub(now).Round(time.Second), name, p.Name)
	if cur, ok := c.mem.waiting[name]; !ok || cur.reason != "CrashLoopBackOff" {
		out = append(out, c.event(c.now, name, pod.EventWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", name, p.Name)))
	}
	c.mem.waiting[name] = waitingState{reason: "CrashLoopBackOff", message: msg}
	return out
}

// hookObsolete tells whether the postStart hook under way is pointless:
// its container will be stopped for the desired pod, or the node is
// shutting down.
func (c *podCore) hookObsolete() bool {
	return c.hook != nil && (c.halted || c.order.leaving || c.hook.obsolete(c.desired))
}

// runningHook is the postStart hook under way.
type runningHook struct {
	pod       *pod.Pod
	container *v1.Container
}

// obsolete tells whether the container the hook runs for will be stopped
// for desired: the pod is removed or replaced, or the container changed or
// dropped, as pod.Compare (and `staticlet diff`) decides it.
func (h *runningHook) obsolete(desired *pod.Pod) bool {
	return pod.Compare(h.pod, desired).Affects(h.container.Name)
}
