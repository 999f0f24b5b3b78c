package reconcile

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// restartedBy is who asks for a restart, as the events tell it.
const restartedBy = "restart requested through staticlet restart"

// askRestart notes containers to restart; the next pass restarts them.
func (c *podCore) askRestart(names []string) {
	if c.mem.restartAsked == nil {
		c.mem.restartAsked = map[string]bool{}
	}
	for _, n := range names {
		c.mem.restartAsked[n] = true
	}
}

// takeRestart tells whether the pass under way is to restart container
// name, and resets its backoff if so: its failed starts and its restart
// streak are forgotten, so that it starts at once and its next failure
// waits the initial delay. A request is taken once.
func (c *podCore) takeRestart(name string) bool {
	if !c.mem.restartNow[name] {
		return false
	}
	delete(c.mem.restartNow, name)
	delete(c.mem.streaks, name)
	delete(c.mem.waiting, name)
	return true
}

// restartRequested stops running container r of ctr for a restart asked
// through staticlet restart, with the pod's grace period after its preStop
// hook; it starts again as after a failed liveness probe, whatever its
// exit code.
func (g *convergePass) restartRequested(out []action, ctr *v1.Container, r pod.Record) []action {
	c := g.c
	out = append(out, c.event(c.now, ctr.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s will be restarted: %s", ctr.Name, restartedBy)))
	c.probes.killed[r.ID] = true
	return g.stopOne(out, r, podGrace(g.p), g.p, stopToRestart, "for a restart")
}

// restartWaiting tells in an event what came of a restart asked for
// container name, which did not run: it starts now (st), or it has
// finished for good under its restart policy.
func (c *podCore) restartWaiting(out []action, name string, st step) []action {
	if st.kind == stepNone {
		return append(out, c.event(c.now, name, pod.EventWarning, "Failed",
			fmt.Sprintf("Container %s is not restarted: it completed, and its restart policy does not run it again (%s)", name, restartedBy)))
	}
	return append(out, c.event(c.now, name, pod.EventNormal, "Restarting",
		fmt.Sprintf("Container %s starts now, its back-off reset: %s", name, restartedBy)))
}

// restartsNotReached tells in events of the restarts asked that a pass
// does not reach: the pod is done (terminal), so nothing in it runs
// again, or its init containers have not finished, so its containers
// start anyway once they have.
func (c *podCore) restartsNotReached(out []action, terminal bool) []action {
	names := make([]string, 0, len(c.mem.restartNow))
	for name := range c.mem.restartNow {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		delete(c.mem.restartNow, name)
		if terminal {
			out = append(out, c.event(c.now, name, pod.EventWarning, "Failed",
				fmt.Sprintf("Container %s is not restarted: the pod completed, and its restart policy runs nothing in it again (%s)", name, restartedBy)))
			continue
		}
		out = append(out, c.event(c.now, name, pod.EventNormal, "Restarting",
			fmt.Sprintf("Container %s starts once the init containers have finished (%s)", name, restartedBy)))
	}
	return out
}
