package reconcile

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// defaultAfterWait is the longest a pod waits for the pods its
// staticlet.io/after annotation names to be Ready before it starts
// anyway: a dependency that never comes must not keep it down for good.
const defaultAfterWait = 2 * time.Minute

// podOrder is what orders a pod's start after the pods it names in its
// staticlet.io/after annotation, and what orders others on it: its own
// readiness.
type podOrder struct {
	ready bool // the pod was Ready at its last report
	// deps holds, by the name the annotation gives, whether each pod the
	// pod starts after is Ready, as the loop last told; a name missing is
	// a pod not Ready (or not there).
	deps map[string]bool
	// since is when the pod began waiting for them; zero when it does not
	// wait.
	since time.Time
	// passed is the spec (SandboxHash) that waited already: a sandbox made
	// again for it (a failed create, a dead sandbox) does not wait again.
	passed string
	limit  time.Duration // the longest it waits
	// leaving is set while the pod's removal waits for pods that stop
	// before it: its manifest is gone, so nothing starts, nor is looked
	// at, until the removal; a new desired pod lifts it.
	leaving bool
}

// setDeps takes the readiness of the pods the pod starts after, and tells
// whether it changed.
func (c *podCore) setDeps(ready map[string]bool) bool {
	changed := len(ready) != len(c.order.deps)
	for name, r := range ready {
		if c.order.deps[name] != r {
			changed = true
		}
	}
	c.order.deps = ready
	return changed
}

// awaitDeps decides whether pod p, whose sandbox is about to be made, has
// to wait for the pods it starts after: until they are Ready, at most its
// limit, and not once a restart of the pod is asked. It returns the
// actions that end the pass when it waits; nil (and what to tell) when
// the sandbox may be made.
func (c *podCore) awaitDeps(out []action, p *pod.Pod) (wait bool, _ []action) {
	names := p.After()
	if len(names) == 0 || c.order.passed == p.SandboxHash {
		return false, out
	}
	var missing []string
	for _, n := range names {
		if !c.order.deps[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		c.order.since, c.order.passed = time.Time{}, p.SandboxHash
		return false, out
	}
	if c.order.since.IsZero() {
		c.order.since = c.now
	}
	until := c.order.since.Add(c.order.limit)
	list := strings.Join(missing, ", ")
	if len(c.mem.restartNow) > 0 {
		// Asked to start now (staticlet restart): the operator decides
		// the dependencies may be skipped.
		c.order.since, c.order.passed = time.Time{}, p.SandboxHash
		return false, append(out, c.event(c.now, "", pod.EventNormal, "DependencySkipped",
			fmt.Sprintf("Starting without waiting any longer for pod %s to be Ready (%s): %s", list, pod.AnnotationAfter, restartedBy)))
	}
	if !c.now.Before(until) {
		c.order.since, c.order.passed = time.Time{}, p.SandboxHash
		return false, append(out, c.event(c.now, "", pod.EventWarning, "DependencyTimeout",
			fmt.Sprintf("Starting without waiting any longer for pod %s to be Ready (%s): waited %s", list, pod.AnnotationAfter, c.order.limit)))
	}
	msg := fmt.Sprintf("waiting for pod %s to be Ready (%s), at most %s more", list, pod.AnnotationAfter, until.Sub(c.now).Round(time.Second))
	if c.sandbox.down.reason != "WaitingForPods" {
		out = append(out, c.event(c.now, "", pod.EventNormal, "WaitingForPods",
			fmt.Sprintf("Waiting for pod %s to be Ready before starting (at most %s)", list, c.order.limit)))
	}
	c.sandbox.down = waitingState{reason: "WaitingForPods", message: msg}
	return true, out
}

// reportStatus reports status st, and tells the loop when the pod's
// readiness changed, which orders the pods that start after it and the
// stops.
func (c *podCore) reportStatus(out []action, st *v1.Pod) []action {
	out = append(out, report{pod: st})
	ready := false
	for _, cond := range st.Status.Conditions {
		if cond.Type == v1.PodReady {
			ready = cond.Status == v1.ConditionTrue
		}
	}
	if ready != c.order.ready {
		c.order.ready = ready
		out = append(out, readiness{ready: ready})
	}
	return out
}

// fileChanged notes that a file container name mounts changed: it
// restarts, if it runs.
func (c *podCore) fileChanged(name, path string) {
	c.mem.changed[name] = path
}
