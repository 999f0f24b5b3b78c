package reconcile

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// convergePass runs a pod's init containers to completion, then keeps its
// app containers as the spec and restart policy say, in sandbox sb as
// listed in v. Each container's decision is taken from v and what the
// core remembers of it, at now; its actions run one at a time, in the
// order of the spec.
type convergePass struct {
	c   *podCore
	p   *pod.Pod
	sb  pod.Record
	v   view
	now time.Time // the time the decisions are taken at

	terminal    bool // nothing in the pod will run again
	initialized bool // the init containers were done before this pass
	// justInitialized is set while the init containers looked at in this
	// pass were sidecars started, or running, so that the app containers
	// start in the same pass.
	justInitialized bool

	wakeAt time.Time // the soonest time to look again
	errs   []error
	then   func(out []action, again time.Duration, err error) []action
}

// converge converges the containers of p in sb, then calls then with how
// soon to look again (0: at the next trigger) and what went wrong.
func (c *podCore) converge(out []action, p *pod.Pod, sb pod.Record, v view, then func([]action, time.Duration, error) []action) []action {
	g := &convergePass{c: c, p: p, sb: sb, v: v, now: c.now, then: then}
	g.terminal = c.terminal(p, v, sb.ID)
	g.initialized = initDone(p, sb, v, c.started)
	if g.initialized {
		return g.apps(out)
	}
	// Init containers one at a time, in order; a sidecar (an init
	// container that restarts Always) is started and left running.
	g.justInitialized = true
	return g.inits(out, 0)
}

// later asks for a look at t, unless one is due sooner.
func (g *convergePass) later(t time.Time) {
	if g.wakeAt.IsZero() || t.Before(g.wakeAt) {
		g.wakeAt = t
	}
}

// inits takes the init containers from the i-th on.
func (g *convergePass) inits(out []action, i int) []action {
	p := g.p
	for ; i < len(p.Spec.InitContainers); i++ {
		ctr := &p.Spec.InitContainers[i]
		recs := g.v.in(g.sb.ID, ctr.Name)
		current := len(recs) > 0 && recs[0].Hash == pod.ContainerHash(ctr)
		if isSidecar(ctr) {
			if current && recs[0].State == pod.TaskRunning {
				if g.c.started(ctr, recs[0].ID) {
					continue
				}
				// What follows a sidecar waits for its startup probe, as
				// with the kubelet; its verdict brings the next look.
				g.justInitialized = false
				return g.apps(out)
			}
			next := i + 1
			return g.keep(out, ctr, pod.KindInit, v1.RestartPolicyAlways, func(out []action, ok bool) []action {
				if ok && ctr.StartupProbe == nil {
					return g.inits(out, next)
				}
				g.justInitialized = false
				return g.apps(out)
			})
		}
		if current && recs[0].State == pod.TaskExited && recs[0].ExitCode == 0 {
			continue // done
		}
		return g.keep(out, ctr, pod.KindInit, initPolicy(p.Spec.RestartPolicy), func(out []action, _ bool) []action {
			g.justInitialized = false
			return g.apps(out)
		})
	}
	return g.apps(out)
}

// apps keeps the sidecars and app containers of an initialised pod that is
// not done, then clears away what is not wanted.
func (g *convergePass) apps(out []action) []action {
	if !(g.initialized || g.justInitialized) || g.terminal {
		out = g.c.restartsNotReached(out, g.terminal)
		return g.unwanted(out)
	}
	type item struct {
		c      *v1.Container
		kind   pod.ContainerKind
		policy v1.RestartPolicy
	}
	var items []item
	// Sidecars started in this pass are not in v: they are not looked at
	// again until the next.
	for i := range g.p.Spec.InitContainers {
		if c := &g.p.Spec.InitContainers[i]; isSidecar(c) && g.initialized {
			items = append(items, item{c, pod.KindInit, v1.RestartPolicyAlways})
		}
	}
	for i := range g.p.Spec.Containers {
		items = append(items, item{&g.p.Spec.Containers[i], pod.KindApp, g.p.Spec.RestartPolicy})
	}
	var next func(out []action, i int) []action
	next = func(out []action, i int) []action {
		if i == len(items) {
			return g.unwanted(out)
		}
		it := items[i]
		return g.keep(out, it.c, it.kind, it.policy, func(out []action, _ bool) []action { return next(out, i+1) })
	}
	return next(out, 0)
}

// keep decides and takes the next step for container ctr under policy,
// then calls k with whether ctr runs as asked afterwards.
func (g *convergePass) keep(out []action, ctr *v1.Container, kind pod.ContainerKind, policy v1.RestartPolicy, k func([]action, bool) []action) []action {
	c := g.c
	recs := g.v.in(g.sb.ID, ctr.Name)
	running := len(recs) > 0 && recs[0].State == pod.TaskRunning && recs[0].Hash == pod.ContainerHash(ctr)
	asked := c.takeRestart(ctr.Name)
	if asked && running {
		return c.restartRequested(out, g.p, ctr, recs[0], func(out []action, err error) []action {
			if err != nil {
				g.errs = append(g.errs, err)
			}
			// Look again at once: it starts again, its backoff reset.
			g.later(g.now)
			return k(out, false)
		})
	}
	if path, ok := c.mem.changed[ctr.Name]; ok {
		delete(c.mem.changed, ctr.Name)
		if running {
			return c.restartChanged(out, g.p, ctr, recs[0], path, func(out []action, err error) []action {
				if err != nil {
					g.errs = append(g.errs, err)
				}
				g.later(g.now)
				return k(out, false)
			})
		}
	}
	if running {
		if typ := c.unhealthy(recs[0].ID); typ != "" {
			return c.killUnhealthy(out, g.p, ctr, recs[0], typ, func(out []action, err error) []action {
				if err != nil {
					g.errs = append(g.errs, err)
				}
				// Look again at once: it restarts as its policy says.
				g.later(g.now)
				return k(out, false)
			})
		}
	}
	if len(recs) > 0 && c.probes.killed[recs[0].ID] && policy != v1.RestartPolicyNever {
		policy = v1.RestartPolicyAlways
	}
	st := decideContainer(ctr, recs, policy, c.backoff, c.streak(ctr.Name), g.now)
	if asked {
		out = c.restartWaiting(out, ctr.Name, st)
	}
	if st.kind == stepWait {
		g.later(st.until)
		out = c.waitingBackOff(out, g.p, ctr.Name, st.until, g.now)
		return k(out, false)
	}
	return g.apply(out, ctr, kind, st, func(out []action, err error) []action {
		if rl, ok := isRetry(err); ok {
			// Already reported as an event; look again when the wait is over.
			g.later(rl.at)
		} else if err != nil {
			g.errs = append(g.errs, err)
		}
		return k(out, err == nil)
	})
}

// apply takes step st for container ctr: a container replaced is stopped
// after its preStop hook, and a container started counts as started once
// its postStart hook has returned. k gets what went wrong.
func (g *convergePass) apply(out []action, ctr *v1.Container, kind pod.ContainerKind, st step, k func([]action, error) []action) []action {
	c := g.c
	switch st.kind {
	case stepNone, stepWait:
		return k(out, nil)
	case stepReplace:
		out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s definition changed, will be restarted", ctr.Name)))
		old := pod.Record{ID: st.id, Name: ctr.Name, Kind: kind}
		if r := g.v.byID(st.id); r != nil {
			old = *r
		}
		return c.stopOne(out, old, c.replaceGrace(g.p), g.p, func(out []action, err error) []action {
			if err != nil {
				return k(out, err)
			}
			return c.await(out, removeContainer{id: st.id}, func(o outcome) []action {
				if err := o.(removed).err; err != nil {
					return k(nil, err)
				}
				// The new spec starts without the old one's backoff.
				delete(c.mem.streaks, ctr.Name)
				return g.start(nil, ctr, kind, st, k)
			})
		})
	case stepClear:
		// Finished, not replaced: a start an earlier staticlet left under
		// way may still run it, and a second container would then run the
		// process twice.
		return c.await(out, resumeContainer{id: st.id}, func(o outcome) []action {
			r := o.(resumed)
			if r.err != nil {
				return c.await(nil, removeContainer{id: st.id}, func(o outcome) []action {
					if err := o.(removed).err; err != nil {
						return k(nil, err)
					}
					return g.start(nil, ctr, kind, st, k)
				})
			}
			if r.rec.State != pod.TaskRunning {
				return k(nil, nil) // it ran and exited: the next pass decides
			}
			req := pod.ContainerRequest{Pod: g.p, Sandbox: g.sb, Container: ctr, Kind: kind, Attempt: r.rec.Attempt}
			return g.running(nil, r.rec, req, k)
		})
	}
	return g.start(out, ctr, kind, st, k)
}

// start starts container ctr, its image pulled first when its policy says.
func (g *convergePass) start(out []action, ctr *v1.Container, kind pod.ContainerKind, st step, k func([]action, error) []action) []action {
	c := g.c
	if c.halted {
		// The node is shutting down: nothing starts, and the pod's halt
		// stops what runs.
		return k(out, &retryLater{at: c.now})
	}
	if retry := c.mem.failedStarts(ctr).retryAt; retry.After(c.now) {
		return k(out, &retryLater{at: retry})
	}
	return g.ensureImage(out, ctr, func(out []action, err error) []action {
		if err != nil {
			out, err = c.startFailed(out, g.p, ctr, err)
			return k(out, err)
		}
		attempt := max(st.attempt, c.mem.attempts[ctr.Name])
		req := pod.ContainerRequest{Pod: g.p, Sandbox: g.sb, Container: ctr, Kind: kind, Attempt: attempt}
		return c.await(out, startContainer{req: req}, func(o outcome) []action {
			s := o.(started)
			if s.err != nil {
				out, err := c.startFailed(nil, g.p, ctr, s.err)
				return k(out, err)
			}
			return g.running(nil, s.rec, req, k)
		})
	})
}

// running tells that container rec, started for req, runs, and runs its
// postStart hook if it has one.
func (g *convergePass) running(out []action, rec pod.Record, req pod.ContainerRequest, k func([]action, error) []action) []action {
	c, ctr := g.c, req.Container
	delete(c.mem.waiting, ctr.Name)
	delete(c.mem.attempts, ctr.Name)
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Started", fmt.Sprintf("Started container %s (%s)", ctr.Name, shortID(rec.ID))))
	if ctr.Lifecycle == nil || ctr.Lifecycle.PostStart == nil {
		return k(out, nil)
	}
	return c.postStart(out, rec, req, k)
}

// ensureImage pulls container ctr's image when its pull policy says so.
// While the pull runs the pod is reported with ctr waiting in
// ContainerCreating and a Pulling event, as the kubelet shows it; the pull
// holds up only this pod.
func (g *convergePass) ensureImage(out []action, ctr *v1.Container, k func([]action, error) []action) []action {
	c := g.c
	return c.await(out, checkImage{c: ctr}, func(o outcome) []action {
		ic := o.(imageChecked)
		if ic.err != nil {
			return k(nil, ic.err)
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
			return k(out, nil)
		}
		// Keep the failure count for the backoff; the last failure's
		// message goes, so the next failure is told as an event again.
		failed := c.mem.failedStarts(ctr)
		c.mem.waiting[ctr.Name] = waitingState{reason: "ContainerCreating", failures: failed.failures, hash: failed.hash}
		// The report is only for the status shown during the pull: a
		// failed listing leaves the previous one, and the pass's own
		// report follows.
		return c.relist(nil, g.p, g.sb, func(out []action, _ error) []action {
			out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Pulling", fmt.Sprintf("Pulling image %q", ctr.Image)))
			return c.await(out, pullImage{c: ctr}, func(o outcome) []action {
				pl := o.(pulled)
				switch {
				case pl.err == nil:
					return k([]action{c.event(c.now, ctr.Name, pod.EventNormal, "Pulled",
						fmt.Sprintf("Successfully pulled image %q in %s", ctr.Image, pl.took.Round(time.Millisecond)))}, nil)
				case pl.present:
					// Policy Always on a node that cannot reach the
					// registry: run what the node has rather than nothing.
					return k([]action{
						c.event(c.now, ctr.Name, pod.EventWarning, "Failed", fmt.Sprintf("%v; using the image already present", pl.err)),
						note{warn: true, msg: "pull failed; using the image already present", args: []any{"image", ctr.Image, "err", pl.err}},
					}, nil)
				}
				return k(nil, pl.err)
			})
		})
	})
}

// startFailed records why container ctr could not start, and when to try
// again: failed starts back off like crashes, so that a missing image is
// not pulled again every second. The error it returns is a retryLater.
func (c *podCore) startFailed(out []action, p *pod.Pod, ctr *v1.Container, err error) ([]action, error) {
	reason := pod.WaitingReason(err, "CreateContainerError")
	cur := c.mem.failedStarts(ctr)
	if cur.message != err.Error() {
		out = append(out, c.event(c.now, ctr.Name, pod.EventWarning, "Failed", err.Error()))
	}
	failures := cur.failures + 1
	retry := c.now.Add(c.backoff.Delay(failures))
	if reason == "ErrImagePull" && failures > 1 {
		reason = "ImagePullBackOff"
		out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", ctr.Image)))
	}
	c.mem.waiting[ctr.Name] = waitingState{reason: reason, message: err.Error(), failures: failures, retryAt: retry, hash: pod.ContainerHash(ctr)}
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

// postStart runs the postStart hook of container rec, just started for
// req, as the kubelet does: until it returns the container does not count
// as started. A failed hook is a FailedPostStartHook event, and the
// container is stopped (its preStop hook included) so that its restart
// policy decides what follows; k then gets a retryLater for the next look.
// A hook made pointless by a new spec is abandoned.
func (c *podCore) postStart(out []action, rec pod.Record, req pod.ContainerRequest, k func([]action, error) []action) []action {
	c.hook = &runningHook{pod: req.Pod, container: req.Container}
	return c.await(out, postStart{rec: rec, req: req}, func(o outcome) []action {
		c.hook = nil
		h := o.(hookRan)
		ctr := req.Container
		switch {
		case h.err == nil:
			return k(nil, nil)
		case h.abandoned:
			// The spec changed under the hook, or the node is shutting
			// down: the next look replaces or removes the container, or
			// the halt stops it.
			why := "the pod changed"
			if c.halted {
				why = "the node is shutting down"
			}
			return k([]action{note{msg: "postStart hook abandoned: " + why, args: []any{"container", ctr.Name}}}, &retryLater{at: c.now})
		}
		out := []action{
			c.event(c.now, ctr.Name, pod.EventWarning, "FailedPostStartHook", h.msg),
			c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s failed post-start hook, will be killed", ctr.Name)),
		}
		return c.stopOne(out, rec, podGrace(req.Pod), req.Pod, func(out []action, err error) []action {
			if err != nil {
				return k(out, fmt.Errorf("stopping container %q of pod %s after its postStart hook failed: %w", ctr.Name, req.Pod, err))
			}
			return k(out, &retryLater{at: c.now, err: fmt.Errorf("postStart hook of container %q of pod %s: %w", ctr.Name, req.Pod, h.err)})
		})
	})
}

// hookObsolete tells whether the postStart hook under way is pointless:
// its container will be stopped for the desired pod, or the node is
// shutting down.
func (c *podCore) hookObsolete() bool {
	return c.hook != nil && (c.halted || c.hook.obsolete(c.desired))
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

// killUnhealthy stops running container r of ctr, whose liveness or
// startup probe failed, with the probe's grace period, else the pod's, as
// the kubelet does; its restart policy then decides on a restart.
func (c *podCore) killUnhealthy(out []action, p *pod.Pod, ctr *v1.Container, r pod.Record, typ pod.ProbeType, k func([]action, error) []action) []action {
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
	return c.stopOne(out, r, grace, p, func(out []action, err error) []action {
		if err != nil {
			err = fmt.Errorf("stopping container %q of pod %s after its %s probe failed: %w", ctr.Name, p, kind, err)
		}
		return k(out, err)
	})
}

// restartChanged stops running container r of ctr, a file it mounts
// (path) having changed, with the pod's grace period; it restarts as after
// a failed liveness probe: unless its restart policy is Never.
func (c *podCore) restartChanged(out []action, p *pod.Pod, ctr *v1.Container, r pod.Record, path string, k func([]action, error) []action) []action {
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing",
		fmt.Sprintf("Container %s: the content of %s, which it mounts, changed (%s); it will be restarted", ctr.Name, path, pod.AnnotationRestartOnChange)))
	c.probes.killed[r.ID] = true
	return c.stopOne(out, r, podGrace(p), p, func(out []action, err error) []action {
		if err != nil {
			err = fmt.Errorf("stopping container %q of pod %s after %s changed: %w", ctr.Name, p, path, err)
		}
		return k(out, err)
	})
}

// unwanted stops and removes containers the spec no longer has, and all
// but the newest two records of each name (the newest is the current
// container, the one before it gives lastState and previous logs).
func (g *convergePass) unwanted(out []action) []action {
	want := map[string]bool{}
	for _, c := range g.p.Spec.InitContainers {
		want[c.Name] = true
	}
	for _, c := range g.p.Spec.Containers {
		want[c.Name] = true
	}
	var unwanted []pod.Record
	for _, name := range g.v.names() {
		for i, r := range g.v.byName[name] {
			if r.SandboxID == g.sb.ID && (!want[name] || i >= 2) {
				unwanted = append(unwanted, r)
			}
		}
	}
	if len(unwanted) == 0 {
		return g.stopTerminal(out)
	}
	c := g.c
	out = append(out, c.killing(unwanted)...)
	return c.await(out, c.stopAll(unwanted, c.replaceGrace(g.p), g.p, true), func(o outcome) []action {
		out, err := c.stoppedOutcome(o)
		if err != nil {
			g.errs = append(g.errs, err)
		}
		return g.stopTerminal(out)
	})
}

// stopTerminal stops what still runs in a pod that is done: its sidecars,
// once its app containers are done, in reverse order, each after its
// preStop hook, as the kubelet does; then its sandbox. The exited
// containers stay, for their status.
func (g *convergePass) stopTerminal(out []action) []action {
	c := g.c
	if !g.terminal || c.sandbox.termSent {
		return g.finish(out)
	}
	stopSandbox := func(out []action) []action {
		sb := stopOrder{rec: pod.Record{ID: g.sb.ID, Kind: pod.KindSandbox}, grace: sandboxGrace}
		return c.await(out, stopGroup{stops: []stopOrder{sb}, sequential: true}, func(o outcome) []action {
			out, err := c.stoppedOutcome(o)
			if err != nil {
				g.errs = append(g.errs, err)
			} else {
				c.sandbox.termSent = true
			}
			return g.finish(out)
		})
	}
	var stops []stopOrder
	add := func(ctr *v1.Container) {
		if r := g.v.latest(g.sb.ID, ctr.Name); r != nil && r.State == pod.TaskRunning {
			out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Stopping container %s", ctr.Name)))
			stops = append(stops, c.stopOrder(*r, c.grace(), g.p))
		}
	}
	// App containers run on in a terminal pod only when its sandbox died
	// under a pod that never restarts (terminal's rule): they go first.
	for i := range g.p.Spec.Containers {
		add(&g.p.Spec.Containers[i])
	}
	for i := len(g.p.Spec.InitContainers) - 1; i >= 0; i-- {
		if ctr := &g.p.Spec.InitContainers[i]; isSidecar(ctr) {
			add(ctr)
		}
	}
	if len(stops) == 0 {
		return stopSandbox(out)
	}
	return c.await(out, stopGroup{stops: stops, sequential: true}, func(o outcome) []action {
		out, err := c.stoppedOutcome(o)
		if err != nil {
			g.errs = append(g.errs, err)
			return g.finish(out)
		}
		return stopSandbox(out)
	})
}

// finish hands the pass on with how soon to look again.
func (g *convergePass) finish(out []action) []action {
	var again time.Duration
	if !g.wakeAt.IsZero() {
		again = max(g.wakeAt.Sub(g.now), time.Millisecond)
	}
	return g.then(out, again, errors.Join(g.errs...))
}

// initDone tells whether the pod's init containers have all succeeded in
// sandbox sb, sidecars counting once running and started (as started
// says). A sandbox with app containers was initialised, even if the init
// containers' records are gone.
func initDone(p *pod.Pod, sb pod.Record, v view, started func(c *v1.Container, id string) bool) bool {
	for i := range p.Spec.Containers {
		if len(v.in(sb.ID, p.Spec.Containers[i].Name)) > 0 {
			return true
		}
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		recs := v.in(sb.ID, c.Name)
		switch {
		case len(recs) == 0:
			return false
		case isSidecar(c) && (recs[0].State != pod.TaskRunning || !started(c, recs[0].ID)):
			return false
		case !isSidecar(c) && (recs[0].State != pod.TaskExited || recs[0].ExitCode != 0):
			return false
		}
	}
	return true
}

// isSidecar tells whether init container c is a sidecar: started in order
// with the other init containers, then kept running beside the app.
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// terminal tells whether nothing in the pod will run again: every app
// container exited and its restart policy does not restart it, or an init
// container failed under restartPolicy Never.
//
// A restartPolicy Never pod whose sandbox died after any of its containers
// ran is terminal too, as with the kubelet: it gets no second sandbox, in
// which containers that ran would run again; what still runs in the dead
// one is stopped.
func (c *podCore) terminal(p *pod.Pod, v view, sb string) bool {
	if p.Spec.RestartPolicy == v1.RestartPolicyNever && v.sandboxDead(sb) && v.ran(sb) {
		return true
	}
	for i := range p.Spec.InitContainers {
		ctr := &p.Spec.InitContainers[i]
		if r := v.latest(sb, ctr.Name); !isSidecar(ctr) && r != nil && r.State == pod.TaskExited && r.ExitCode != 0 &&
			p.Spec.RestartPolicy == v1.RestartPolicyNever {
			return true
		}
	}
	for i := range p.Spec.Containers {
		ctr := &p.Spec.Containers[i]
		r := v.latest(sb, ctr.Name)
		if r == nil || r.State != pod.TaskExited || r.Hash != pod.ContainerHash(ctr) || restarts(p.Spec.RestartPolicy, r.ExitCode) {
			return false
		}
	}
	return len(p.Spec.Containers) > 0
}
