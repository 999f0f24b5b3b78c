package reconcile

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// convergePass runs a pod's init containers to completion, then keeps its
// app containers as the spec and restart policy say, in sandbox sb as
// listed in v. Each container's decision is taken from v and what the
// core remembers of it, at now; its actions run one at a time, in the
// order of the spec. It is part of a sync pass, and hands on to the sync
// pass's converged when done.
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

	// inInits is set while the init containers are taken, i being the one
	// kept; else i is the one of apps (the sidecars, then the app
	// containers) being kept.
	inInits bool
	i       int
	apps    []keepItem
	// cur is the container being kept.
	cur containerWork

	wakeAt time.Time // the soonest time to look again
	errs   []error
}

// keepItem is a container to keep running as policy says.
type keepItem struct {
	c      *v1.Container
	kind   pod.ContainerKind
	policy v1.RestartPolicy
}

// converge converges the containers of the sync pass's pod in its
// sandbox; converged then gets how soon to look again (0: at the next
// trigger) and what went wrong.
func (c *podCore) converge(out []action) []action {
	s := &c.pass.sync
	c.pass.conv = convergePass{c: c, p: c.pass.p, sb: s.sb, v: s.v, now: c.now}
	g := &c.pass.conv
	g.terminal = c.terminal(g.p, g.v, g.sb.ID)
	g.initialized = initDone(g.p, g.sb, g.v, c.started)
	if g.initialized {
		return g.keepApps(out)
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
	g.inInits = true
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
				return g.keepApps(out)
			}
			g.i = i
			return g.keep(out, ctr, pod.KindInit, v1.RestartPolicyAlways)
		}
		if current && recs[0].State == pod.TaskExited && recs[0].ExitCode == 0 {
			continue // done
		}
		g.i = i
		return g.keep(out, ctr, pod.KindInit, initPolicy(p.Spec.RestartPolicy))
	}
	return g.keepApps(out)
}

// keepApps keeps the sidecars and app containers of an initialised pod
// that is not done, then clears away what is not wanted.
func (g *convergePass) keepApps(out []action) []action {
	g.inInits = false
	if !(g.initialized || g.justInitialized) || g.terminal {
		out = g.c.restartsNotReached(out, g.terminal)
		return g.unwanted(out)
	}
	g.apps = nil
	// Sidecars started in this pass are not in v: they are not looked at
	// again until the next.
	for i := range g.p.Spec.InitContainers {
		if c := &g.p.Spec.InitContainers[i]; isSidecar(c) && g.initialized {
			g.apps = append(g.apps, keepItem{c, pod.KindInit, v1.RestartPolicyAlways})
		}
	}
	for i := range g.p.Spec.Containers {
		g.apps = append(g.apps, keepItem{&g.p.Spec.Containers[i], pod.KindApp, g.p.Spec.RestartPolicy})
	}
	g.i = 0
	return g.nextApp(out)
}

// nextApp keeps the i-th item of apps, or clears away what is not wanted
// once all are kept.
func (g *convergePass) nextApp(out []action) []action {
	if g.i == len(g.apps) {
		return g.unwanted(out)
	}
	it := g.apps[g.i]
	return g.keep(out, it.c, it.kind, it.policy)
}

// kept goes on from the container just kept; ok tells whether it runs as
// asked. A sidecar started is followed by the next init container unless
// its startup probe is to pass first; any other init container looked at
// is followed by the app containers, started once it is done.
func (g *convergePass) kept(out []action, ok bool) []action {
	if !g.inInits {
		g.i++
		return g.nextApp(out)
	}
	if ctr := g.cur.ctr; isSidecar(ctr) && ok && ctr.StartupProbe == nil {
		return g.inits(out, g.i+1)
	}
	g.justInitialized = false
	return g.keepApps(out)
}

// keep decides and takes the next step for container ctr under policy,
// then hands on to kept.
func (g *convergePass) keep(out []action, ctr *v1.Container, kind pod.ContainerKind, policy v1.RestartPolicy) []action {
	c := g.c
	g.cur = containerWork{ctr: ctr, kind: kind}
	recs := g.v.in(g.sb.ID, ctr.Name)
	running := len(recs) > 0 && recs[0].State == pod.TaskRunning && recs[0].Hash == pod.ContainerHash(ctr)
	asked := c.takeRestart(ctr.Name)
	if asked && running {
		return g.restartRequested(out, ctr, recs[0])
	}
	if path, ok := c.mem.changed[ctr.Name]; ok {
		delete(c.mem.changed, ctr.Name)
		if running {
			return g.restartChanged(out, ctr, recs[0], path)
		}
	}
	if running {
		if typ := c.unhealthy(recs[0].ID); typ != "" {
			return g.killUnhealthy(out, ctr, recs[0], typ)
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
		return g.kept(out, false)
	}
	g.cur.st = st
	return g.apply(out)
}

// applied goes on once the step applied to the current container is
// taken, or failed with err.
func (g *convergePass) applied(out []action, err error) []action {
	if rl, ok := isRetry(err); ok {
		// Already reported as an event; look again when the wait is over.
		g.later(rl.at)
	} else if err != nil {
		g.errs = append(g.errs, err)
	}
	return g.kept(out, err == nil)
}

// restarted goes on once the current container, running, was stopped to
// be restarted (a restart asked, a file changed, a probe failed), or
// failed to stop with err.
func (g *convergePass) restarted(out []action, err error) []action {
	if err != nil {
		g.errs = append(g.errs, err)
	}
	// Look again at once: it starts again as its policy says, its backoff
	// reset when a restart was asked.
	g.later(g.now)
	return g.kept(out, false)
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
	return c.wait(out, atConvStopUnwanted, c.stopAll(unwanted, c.replaceGrace(g.p), g.p, true))
}

// unwantedStopped goes on to what a terminal pod still runs.
func (g *convergePass) unwantedStopped(s stopped) []action {
	out, err := g.c.stoppedEvents(s)
	if err != nil {
		g.errs = append(g.errs, err)
	}
	return g.stopTerminal(out)
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
		return g.stopSandbox(out)
	}
	return c.wait(out, atConvStopSidecars, stopGroup{stops: stops, sequential: true})
}

// sidecarsStopped goes on to the terminal pod's sandbox.
func (g *convergePass) sidecarsStopped(s stopped) []action {
	out, err := g.c.stoppedEvents(s)
	if err != nil {
		g.errs = append(g.errs, err)
		return g.finish(out)
	}
	return g.stopSandbox(out)
}

// stopSandbox stops the sandbox of a terminal pod.
func (g *convergePass) stopSandbox(out []action) []action {
	sb := stopOrder{rec: pod.Record{ID: g.sb.ID, Kind: pod.KindSandbox}, grace: sandboxGrace}
	return g.c.wait(out, atConvStopSandbox, stopGroup{stops: []stopOrder{sb}, sequential: true})
}

// sandboxStopped ends the containers' part of the pass.
func (g *convergePass) sandboxStopped(s stopped) []action {
	out, err := g.c.stoppedEvents(s)
	if err != nil {
		g.errs = append(g.errs, err)
	} else {
		g.c.sandbox.termSent = true
	}
	return g.finish(out)
}

// finish hands the pass on with how soon to look again.
func (g *convergePass) finish(out []action) []action {
	var again time.Duration
	if !g.wakeAt.IsZero() {
		again = max(g.wakeAt.Sub(g.now), time.Millisecond)
	}
	return g.c.converged(out, again, errors.Join(g.errs...))
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
