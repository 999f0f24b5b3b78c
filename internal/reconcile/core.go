package reconcile

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// podCore is everything one pod's life depends on, and the decisions made
// from it. It is pure: it takes what happened (a new spec, a probe
// verdict, the outcome of an action) with the time, and returns what to do
// next as actions. It never calls the runtime, reads a clock or starts a
// goroutine; one worker owns it and performs its actions.
//
// A pass is one look at the pod: list its containers, decide, act, report.
// A pass's decisions run in the order the kubelet's sync runs them, one
// I/O action at a time: the core hands out an action and notes where the
// pass stands (pass.at, a stage), and step carries on from that stage
// with the action's outcome.
type podCore struct {
	key     pod.Key
	backoff Backoff
	hostIPs []string

	desired *pod.Pod // nil: the pod must go
	last    *pod.Pod // the last desired pod, for its grace period once it is removed
	// halted is set while the node shuts down: nothing starts.
	halted  bool
	mem     containerMemory
	sandbox sandboxMemory
	probes  probeMemory
	// oomSeen holds the OOM-killed containers already told of in an
	// event; nil until the first pass, which tells of none: those were
	// killed before this worker began.
	oomSeen map[string]bool
	// filesLeft holds the UIDs of removed sandboxes whose files (state,
	// logs, cgroups) are still to be removed: a failed removal is tried
	// again on the next pass, which no longer finds their containers.
	filesLeft map[string]bool
	// order is what orders the pod's start after others', and theirs
	// after its.
	order podOrder
	// hook is the postStart hook under way, if any.
	hook *runningHook
	// now is the time of the latest input.
	now time.Time
	// pass is the pass under way: where it stands and what it knows.
	pass pass
}

// containerMemory is what the core remembers of each container name
// beyond what the runtime reports.
type containerMemory struct {
	streaks  map[string]*streak // restart backoff
	waiting  map[string]waitingState
	attempts map[string]int // restart counts carried across a sandbox re-creation
	// arrived holds the images that became present since the last pass,
	// by full name.
	arrived map[string]bool
	// changed holds, by container name, a mounted file whose content
	// changed (restart-on-change): the container restarts.
	changed map[string]string
	// restartAsked holds the containers whose restart was asked since the
	// pass under way began (staticlet restart); restartNow those the pass
	// under way restarts, taken from restartAsked as it begins. A sandbox
	// waiting out its backoff is tried again at once for them. A request
	// the pass does not reach (the pod is not initialised, waits for the
	// pods it starts after, or is done) is dropped with it.
	restartAsked, restartNow map[string]bool
}

// sandboxMemory is what the core remembers of the pod's sandbox.
type sandboxMemory struct {
	// retry backs off the restarts of the pod's sandbox, and down says why
	// it is not running, for the status (zero when it runs).
	retry sandboxRetry
	down  waitingState
	// termSent is set once a terminal pod's sandbox has been stopped.
	termSent bool
	// volumes is what the sandbox's configMap, secret and projected
	// volumes were last written from.
	volumes objectVolumes
}

// probeMemory is what the probes said and did.
type probeMemory struct {
	results map[string]probeState // by container ID
	// killed holds the containers stopped because a liveness or startup
	// probe failed: they restart unless the policy is Never, whatever
	// their exit code, as with the kubelet.
	killed map[string]bool
}

// waitingState is why a container is not running, when a start failed.
type waitingState struct {
	reason, message string
	failures        int       // failed starts in a row
	retryAt         time.Time // no new start before this
	// hash is the spec (ContainerHash) the failures are of: a new spec
	// starts without their backoff, as the kubelet keys its backoff by
	// the container's spec.
	hash string
}

// failedStarts returns the failed starts of container ctr of p as it is
// now: those of another spec do not count, nor a configuration error
// (CreateContainerConfigError) once an object of the pod changed.
func (m containerMemory) failedStarts(p *pod.Pod, ctr *v1.Container) waitingState {
	w := m.waiting[ctr.Name]
	if w.failures > 0 && w.hash != startHash(p, ctr, w.reason) {
		return waitingState{}
	}
	return w
}

// startHash is what the failed starts of container ctr of p are of, for
// reason: its spec, and for a configuration error the pod's objects too,
// so that the object it waits for starts it at once.
func startHash(p *pod.Pod, ctr *v1.Container, reason string) string {
	if reason == reasonConfigError {
		return pod.ContainerHash(ctr) + "+" + p.ObjectsHash
	}
	return pod.ContainerHash(ctr)
}

// reasonConfigError is the kubelet's reason for a container whose
// configuration cannot be made, a ConfigMap or Secret missing.
const reasonConfigError = "CreateContainerConfigError"

func newCore(key pod.Key, b Backoff, hostIPs []string) *podCore {
	return &podCore{
		key: key, backoff: b, hostIPs: hostIPs,
		mem: containerMemory{streaks: map[string]*streak{}, waiting: map[string]waitingState{}, attempts: map[string]int{},
			changed: map[string]string{}},
		order:  podOrder{limit: defaultAfterWait},
		probes: probeMemory{results: map[string]probeState{}, killed: map[string]bool{}},
	}
}

// setDesired takes a new desired pod, nil when it must go.
func (c *podCore) setDesired(p *pod.Pod) { c.desired, c.order.leaving = p, false }

// setLeaving halts the pod's starts while its removal waits its turn.
func (c *podCore) setLeaving() { c.order.leaving = true }

// imagesArrived notes images that became present; their waiting
// containers start at the next pass without waiting out their backoff.
func (c *podCore) imagesArrived(names []string) {
	if c.mem.arrived == nil {
		c.mem.arrived = map[string]bool{}
	}
	for _, n := range names {
		c.mem.arrived[n] = true
	}
}

// setHalted halts the pod's starts for a node shutdown, or lifts that.
func (c *podCore) setHalted(h bool) { c.halted = h }

// abandon drops the pass under way, whose outcome will never come: the
// worker is going away.
func (c *podCore) abandon() { c.pass, c.hook = pass{}, nil }

// begin starts a pass. It returns nothing when there is nothing to do: a
// pod the node's shutdown stopped waits for the node to resume.
func (c *podCore) begin(now time.Time) []action {
	if c.pass.at != idle {
		panic(fmt.Sprintf("reconcile: a pass begun during another, at %s", c.pass.at))
	}
	c.pass = pass{}
	c.now = now
	c.mem.restartNow, c.mem.restartAsked = c.mem.restartAsked, nil
	p := c.desired
	if c.order.leaving {
		return nil
	}
	if p == nil {
		return c.beginRemove()
	}
	if c.halted {
		return nil
	}
	out := c.retryArrived(p)
	return c.beginSync(out, p)
}

// step carries the pass on with the outcome of its last action.
func (c *podCore) step(o outcome, now time.Time) []action {
	at := c.pass.at
	if at == idle {
		panic(fmt.Sprintf("reconcile: outcome %T with no pass under way", o))
	}
	c.pass.at, c.now = idle, now
	return c.resume(at, o)
}

// wait ends out with I/O action a, whose outcome step hands to stage at.
func (c *podCore) wait(out []action, at stage, a action) []action {
	c.pass.at = at
	return append(out, a)
}

// done ends the pass.
func done(out []action, again time.Duration, err error) []action {
	return append(out, finish{again: again, err: err})
}

// event is an event about the pod, of one of its containers when
// container is not empty.
func (c *podCore) event(now time.Time, container, typ, reason, msg string) emit {
	return emit{pod.Event{Time: now, Pod: c.key.String(), Container: container, Type: typ, Reason: reason, Message: msg}}
}

// grace is the termination grace period of the pod as last specified.
func (c *podCore) grace() time.Duration {
	if c.last != nil && c.last.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*c.last.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}

// replaceGrace is the grace for containers being replaced: that of the
// spec they were started for, when this core has seen it, else p's.
func (c *podCore) replaceGrace(p *pod.Pod) time.Duration {
	if c.last == nil {
		c.last = p
	}
	return c.grace()
}

// streak returns the restart streak of container name.
func (c *podCore) streak(name string) *streak {
	s, ok := c.mem.streaks[name]
	if !ok {
		s = &streak{}
		c.mem.streaks[name] = s
	}
	return s
}

// retryLater is a step that cannot be taken before at; err, if not nil, is
// why.
type retryLater struct {
	at  time.Time
	err error
}

func (r *retryLater) Error() string {
	if r.err == nil {
		return "retrying at " + r.at.Format(time.RFC3339Nano)
	}
	return r.err.Error()
}

func (r *retryLater) Unwrap() error { return r.err }

// isRetry tells whether err is a retryLater, and returns it.
func isRetry(err error) (*retryLater, bool) {
	var rl *retryLater
	ok := errors.As(err, &rl)
	return rl, ok
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
