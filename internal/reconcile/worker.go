package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// defaultGrace is the grace period for a pod staticlet finds running but has
// no manifest for, such as one left by an earlier run whose file is gone.
const defaultGrace = 30 * time.Second

// sandboxGrace is how long the pause process gets: it exits on SIGTERM.
const sandboxGrace = 2 * time.Second

// worker drives one pod through its life. Only its own goroutine calls sync;
// the reconciler's loop hands it new desired specs through set and wakes it.
type worker struct {
	key     pod.Key
	rt      Runtime
	rep     Reporter
	backoff Backoff
	now     func() time.Time
	hostIP  string
	log     *slog.Logger
	prober  Prober

	wake chan struct{}

	// mu guards the fields below, shared with the reconciler's loop.
	mu      sync.Mutex
	desired *pod.Pod              // nil: the pod must go
	exited  bool                  // the goroutine has returned after removing the pod
	hook    *runningHook          // the postStart hook being waited on, if any
	probes  map[string]probeState // probe results by container ID, noted by the loop
	arrived map[string]bool       // images that arrived since the last pass, by full name
	halt    *haltOrder            // the node is shutting down: stop the pod, start nothing

	// Owned by the worker's goroutine.
	last     *pod.Pod           // the last desired pod, for its grace period once it is removed
	streaks  map[string]*streak // restart backoff per container name
	waiting  map[string]waitingState
	attempts map[string]int // restart counts carried across a sandbox re-creation
	termSent bool           // a terminal pod's sandbox has been stopped
	// probeKilled holds the containers stopped because a liveness or
	// startup probe failed: they restart unless the policy is Never,
	// whatever their exit code, as with the kubelet.
	probeKilled map[string]bool
	// oomSeen holds the OOM-killed containers already told of in an
	// event; nil until the first pass, which tells of none: those were
	// killed before this worker began.
	oomSeen map[string]bool
	// filesLeft holds the UIDs of removed sandboxes whose files (state,
	// logs, cgroups) are still to be removed: a failed removal is tried
	// again on the next pass, which no longer finds their containers.
	filesLeft map[string]bool
	// sbRetry backs off the restarts of the pod's sandbox, and sbDown
	// says why it is not running, for the status (zero when it runs).
	sbRetry sandboxRetry
	sbDown  waitingState
}

// waitingState is why a container is not running, when a start failed.
type waitingState struct {
	reason, message string
	failures        int       // failed starts in a row
	retryAt         time.Time // no new start before this
}

func newWorker(key pod.Key, cfg *Config) *worker {
	return &worker{
		key:      key,
		rt:       cfg.Runtime,
		rep:      cfg.Reporter,
		backoff:  cfg.Backoff,
		now:      cfg.Now,
		hostIP:   cfg.HostIP,
		log:      cfg.Logger.With("pod", key.String()),
		prober:   cfg.Prober,
		probes:   map[string]probeState{},
		wake:     make(chan struct{}, 1),
		streaks:  map[string]*streak{},
		waiting:  map[string]waitingState{},
		attempts: map[string]int{},

		probeKilled: map[string]bool{},
	}
}

// set hands the worker a new desired pod (nil to remove it). It reports
// false when the worker has already exited, so the caller starts another.
func (w *worker) set(p *pod.Pod) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exited {
		return false
	}
	w.desired = p
	if w.hook != nil && w.hook.obsolete(p) {
		// The container will be stopped: do not wait on its hook.
		w.hook.cancel()
	}
	w.poke()
	return true
}

// poke asks the worker to look at its pod again.
func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run is the worker's goroutine. It returns when ctx ends, leaving the pod
// running, or once a removed pod is completely gone.
func (w *worker) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			if o, p := w.halted(); o != nil {
				// A node shutdown under way is seen through before exiting.
				w.obey(o, p)
			}
			return
		case <-w.wake:
		case <-timer.C:
		}
		w.mu.Lock()
		p, halt := w.desired, w.halt
		arrived := w.arrived
		w.arrived = nil
		w.mu.Unlock()
		if halt != nil {
			w.obey(halt, p)
			if p != nil {
				continue // nothing starts until the node resumes
			}
		}
		w.retryArrived(p, arrived)

		var again time.Duration
		var err error
		if p == nil {
			err = w.remove(ctx)
			if err == nil && w.tryExit() {
				return
			}
		} else {
			start := time.Now()
			again, err = w.sync(ctx, p)
			w.last = p
			w.log.Debug("synced pod", "took", time.Since(start), "again", again)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("syncing pod", "err", err)
			// Level-triggered: try again soon, whatever failed.
			if again == 0 || again > time.Second {
				again = time.Second
			}
		}
		if again > 0 {
			timer.Reset(again)
		}
	}
}

// tryExit marks the worker exited unless a new desired pod arrived meanwhile.
func (w *worker) tryExit() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.desired != nil || (w.halt != nil && !w.halt.finished()) {
		return false
	}
	w.exited = true
	return true
}

// grace is the termination grace period of the pod as last specified.
func (w *worker) grace() time.Duration {
	if w.last != nil && w.last.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*w.last.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}

// remove terminates everything the pod has and deletes it.
func (w *worker) remove(ctx context.Context) error {
	recs, err := w.rt.PodContainers(ctx, w.key)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		w.event("", pod.EventNormal, "Killing", "Stopping pod: its manifest was removed")
	}
	w.prober.Set(w.key, nil)
	if err := w.terminate(ctx, recs, w.grace(), nil); err != nil {
		return err
	}
	if w.filesLeft == nil {
		w.filesLeft = map[string]bool{}
	}
	for _, r := range recs {
		w.filesLeft[r.PodUID] = true
	}
	var errs []error
	for uid := range w.filesLeft {
		if err := w.rt.RemovePodFiles(ctx, w.key.Namespace, w.key.Name, uid); err != nil {
			errs = append(errs, fmt.Errorf("removing the files of pod %s: %w", w.key, err))
			continue
		}
		delete(w.filesLeft, uid)
	}
	w.rep.DeletePod(w.key)
	return errors.Join(errs...)
}

// terminate stops the containers among recs, each with grace (which its
// preStop hook shares, see stopContainer; p, if not nil, is the pod being
// synced, where their specs may be): the app containers, then the init
// containers (sidecars outlive the app they serve), then the sandboxes;
// and removes them all. It returns when every process is gone, so a
// replacement never overlaps with what it replaces.
func (w *worker) terminate(ctx context.Context, recs []pod.Record, grace time.Duration, p *pod.Pod) error {
	return w.stopAll(ctx, recs, grace, p, true)
}

// stopAll is terminate, which removes the containers only if remove is set.
func (w *worker) stopAll(ctx context.Context, recs []pod.Record, grace time.Duration, p *pod.Pod, remove bool) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	stop := func(r pod.Record, g time.Duration) {
		defer wg.Done()
		err := w.stopContainer(ctx, r, g, p)
		if err == nil && remove {
			err = w.rt.RemoveContainer(ctx, r.ID)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	// App containers first, then init containers (sidecars, which serve
	// the app until it is gone), then the sandboxes, each group in parallel.
	for _, kind := range []pod.ContainerKind{pod.KindApp, pod.KindInit, pod.KindSandbox} {
		g := grace
		if kind == pod.KindSandbox {
			g = sandboxGrace
		}
		for _, r := range recs {
			if r.Kind != kind {
				continue
			}
			if r.State == pod.TaskRunning && kind != pod.KindSandbox {
				w.event(r.Name, pod.EventNormal, "Killing", fmt.Sprintf("Stopping container %s", r.Name))
			}
			wg.Add(1)
			go stop(r, g)
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// sync converges pod p one step and reports its status. It returns how soon
// it wants to look again (0: at the next event).
func (w *worker) sync(ctx context.Context, p *pod.Pod) (time.Duration, error) {
	recs, err := w.rt.PodContainers(ctx, w.key)
	if err != nil {
		return 0, err
	}
	v := newView(recs)
	sb, ok := v.current(p)
	startLater := false // the sandbox was created, and is started after its containers
	restart := false    // the sandbox's pause is started again, after its containers
	d := w.decideSandbox(p, v, sb, ok, w.now())
	switch d.step {
	case sandboxWait:
		if !ok || !inPlace(p, sb) {
			// Nothing of the pod runs without its sandbox: wait for it.
			return w.sandboxDue(), w.reportFresh(ctx, p, sb)
		}
		// The containers run on meanwhile.
	case sandboxRestart:
		restart = true
	case sandboxReplace:
		// The sandbox died under a pod that should still run: replace it.
		w.event("", pod.EventNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		ok = false
	}
	keep, keepUID := "", ""
	if ok {
		keep, keepUID = sb.ID, sb.PodUID
	}
	if stale := v.stale(keep); len(stale) > 0 {
		w.noteAttempts(v, p)
		if err := w.terminate(ctx, stale, w.replaceGrace(p), p); err != nil {
			return 0, err
		}
		// The files of a replaced pod go with it; a sandbox re-created for
		// the same pod keeps them (emptyDir content survives, as with the
		// kubelet).
		for _, r := range stale {
			if r.Kind == pod.KindSandbox && r.PodUID != string(p.UID) && r.PodUID != keepUID {
				if err := w.rt.RemovePodFiles(ctx, w.key.Namespace, w.key.Name, r.PodUID); err != nil {
					return 0, fmt.Errorf("removing the files of replaced pod %s: %w", w.key, err)
				}
			}
		}
	}
	if !ok {
		rec, err := w.createSandbox(ctx, p)
		if err != nil {
			// Told of in an event; tried again after the backoff.
			w.log.Warn("creating the pod's sandbox", "err", err)
			return w.sandboxDue(), w.reportFresh(ctx, p, pod.Record{})
		}
		sb = rec
		v = newView([]pod.Record{rec})
		w.termSent = false
		if sharesPID(p) {
			// Its containers join the pause process's PID namespace.
			if sb, err = w.startSandbox(ctx, rec, false); err != nil {
				w.log.Warn("starting the pod's sandbox", "err", err)
				return w.sandboxDue(), w.reportFresh(ctx, p, sb)
			}
		} else {
			// The containers join the pod's pinned namespaces by path, not
			// through the pause process, which starts after them: the app
			// runs sooner, and two runc starts do not compete for the CPU.
			startLater = true
		}
	}
	w.reportOOMKills(v)
	again, err := w.converge(ctx, p, sb, v)
	if startLater || restart {
		if rec, serr := w.startSandbox(ctx, sb, restart); serr != nil {
			// Told of in an event; tried again after the backoff.
			w.log.Warn("starting the pod's sandbox", "err", serr)
			again = minAgain(again, w.sandboxDue())
		} else {
			sb = rec
		}
	}
	if d.step == sandboxWait {
		again = minAgain(again, d.until.Sub(w.now()))
	}
	if err2 := w.reportFresh(ctx, p, sb); err == nil {
		err = err2
	}
	return again, err
}

// sharesPID tells whether p's containers join their sandbox's PID namespace.
func sharesPID(p *pod.Pod) bool {
	return !p.Spec.HostPID && p.Spec.ShareProcessNamespace != nil && *p.Spec.ShareProcessNamespace
}

// reportOOMKills tells in a Warning event of each container found
// OOM-killed since the worker began, once.
func (w *worker) reportOOMKills(v view) {
	seen := map[string]bool{}
	for name, recs := range v.byName {
		for _, r := range recs {
			if !r.OOMKilled {
				continue
			}
			seen[r.ID] = true
			if w.oomSeen != nil && !w.oomSeen[r.ID] {
				w.event(name, pod.EventWarning, "OOMKilled",
					fmt.Sprintf("Container %s was killed by the kernel's OOM killer: it ran out of memory (exit code %d)", name, r.ExitCode))
			}
		}
	}
	// Only containers still there need remembering.
	w.oomSeen = seen
}

// replaceGrace is the grace for containers being replaced: that of the
// spec they were started for, when this worker has seen it, else p's.
func (w *worker) replaceGrace(p *pod.Pod) time.Duration {
	if w.last == nil {
		w.last = p
	}
	return w.grace()
}

// noteAttempts remembers restart counts before a dead sandbox of the same
// pod is replaced, so that restartCount keeps counting across it. A pod
// whose spec changed starts counting afresh, as with the kubelet.
func (w *worker) noteAttempts(v view, p *pod.Pod) {
	for _, s := range v.sandboxes {
		if s.Hash != p.SandboxHash {
			continue
		}
		for name, rs := range v.byName {
			for _, r := range rs {
				if r.SandboxID == s.ID && r.Attempt+1 > w.attempts[name] {
					w.attempts[name] = r.Attempt + 1
				}
			}
		}
	}
}

// converge runs init containers to completion, then keeps the app
// containers as the spec and restart policy say.
func (w *worker) converge(ctx context.Context, p *pod.Pod, sb pod.Record, v view) (time.Duration, error) {
	now := w.now()
	var wakeAt time.Time
	later := func(t time.Time) {
		if wakeAt.IsZero() || t.Before(wakeAt) {
			wakeAt = t
		}
	}
	var errs []error
	// do takes step st for c and tells whether c runs as asked afterwards.
	do := func(c *v1.Container, kind pod.ContainerKind, st step) bool {
		err := w.apply(ctx, p, sb, v, c, kind, st)
		var rl *retryLater
		switch {
		case errors.As(err, &rl):
			// Already reported as an event; look again when the wait is over.
			later(rl.at)
		case err != nil:
			errs = append(errs, err)
		}
		return err == nil
	}
	// keep decides and takes the next step for c under policy.
	keep := func(c *v1.Container, kind pod.ContainerKind, policy v1.RestartPolicy) bool {
		recs := v.in(sb.ID, c.Name)
		if len(recs) > 0 && recs[0].State == pod.TaskRunning && recs[0].Hash == pod.ContainerHash(c) {
			if typ := w.unhealthy(recs[0].ID); typ != "" {
				if err := w.killUnhealthy(ctx, p, c, recs[0], typ); err != nil {
					errs = append(errs, err)
				}
				// Look again at once: it restarts as its policy says.
				later(now)
				return false
			}
		}
		if len(recs) > 0 && w.probeKilled[recs[0].ID] && policy != v1.RestartPolicyNever {
			policy = v1.RestartPolicyAlways
		}
		st := decideContainer(c, recs, policy, w.backoff, w.streak(c.Name), now)
		if st.kind == stepWait {
			later(st.until)
			w.waitingBackOff(p, c.Name, st.until, now)
			return false
		}
		return do(c, kind, st)
	}
	terminal := w.terminal(p, v, sb.ID)
	initialized := w.initDone(p, sb, v)
	justInitialized := false // the last init containers were sidecars, started just now
	if !initialized {
		// Init containers one at a time, in order; a sidecar (an init
		// container that restarts Always) is started and left running.
		justInitialized = true
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			recs := v.in(sb.ID, c.Name)
			current := len(recs) > 0 && recs[0].Hash == pod.ContainerHash(c)
			if isSidecar(c) {
				if current && recs[0].State == pod.TaskRunning {
					continue
				}
				if keep(c, pod.KindInit, v1.RestartPolicyAlways) {
					continue
				}
				justInitialized = false
				break
			}
			if current && recs[0].State == pod.TaskExited && recs[0].ExitCode == 0 {
				continue // done
			}
			keep(c, pod.KindInit, initPolicy(p.Spec.RestartPolicy))
			justInitialized = false
			break
		}
	}
	if (initialized || justInitialized) && !terminal {
		// Sidecars started in this pass are not in v: they are not looked
		// at again until the next.
		for i := range p.Spec.InitContainers {
			if c := &p.Spec.InitContainers[i]; isSidecar(c) && initialized {
				keep(c, pod.KindInit, v1.RestartPolicyAlways)
			}
		}
		for i := range p.Spec.Containers {
			keep(&p.Spec.Containers[i], pod.KindApp, p.Spec.RestartPolicy)
		}
	}
	if err := w.removeUnwanted(ctx, p, sb, v); err != nil {
		errs = append(errs, err)
	}
	if terminal && !w.termSent {
		// Nothing will run in this pod again: stop its sidecars, then let
		// the sandbox go; keep the exited containers for their status.
		if err := w.stopRemaining(ctx, p, sb, v); err != nil {
			errs = append(errs, err)
		} else if err := w.rt.StopContainer(ctx, sb.ID, sandboxGrace); err != nil {
			errs = append(errs, err)
		} else {
			w.termSent = true
		}
	}
	var again time.Duration
	if !wakeAt.IsZero() {
		again = max(wakeAt.Sub(now), time.Millisecond)
	}
	return again, errors.Join(errs...)
}

// initDone tells whether the pod's init containers have all succeeded in
// sandbox sb, sidecars counting once running. A sandbox with app containers
// was initialised, even if the init containers' records are gone.
func (w *worker) initDone(p *pod.Pod, sb pod.Record, v view) bool {
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
		case isSidecar(c) && recs[0].State != pod.TaskRunning:
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

// stopRemaining stops what still runs in a terminal pod: its sidecars,
// once its app containers are done, in reverse order, each after its
// preStop hook, as the kubelet does.
func (w *worker) stopRemaining(ctx context.Context, p *pod.Pod, sb pod.Record, v view) error {
	// App containers run on in a terminal pod only when its sandbox died
	// under a pod that never restarts (terminal's rule): they go first.
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		if r := v.latest(sb.ID, c.Name); r != nil && r.State == pod.TaskRunning {
			w.event(c.Name, pod.EventNormal, "Killing", fmt.Sprintf("Stopping container %s", c.Name))
			if err := w.stopContainer(ctx, *r, w.grace(), p); err != nil {
				return err
			}
		}
	}
	for i := len(p.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &p.Spec.InitContainers[i]
		if r := v.latest(sb.ID, c.Name); r != nil && isSidecar(c) && r.State == pod.TaskRunning {
			w.event(c.Name, pod.EventNormal, "Killing", fmt.Sprintf("Stopping container %s", c.Name))
			if err := w.stopContainer(ctx, *r, w.grace(), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// terminal tells whether nothing in the pod will run again: every app
// container exited and its restart policy does not restart it, or an init
// container failed under restartPolicy Never.
//
// A restartPolicy Never pod whose sandbox died after any of its containers
// ran is terminal too, as with the kubelet: it gets no second sandbox, in
// which containers that ran would run again; what still runs in the dead
// one is stopped.
func (w *worker) terminal(p *pod.Pod, v view, sb string) bool {
	if p.Spec.RestartPolicy == v1.RestartPolicyNever && v.sandboxDead(sb) && v.ran(sb) {
		return true
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if recs := v.latest(sb, c.Name); !isSidecar(c) && recs != nil && recs.State == pod.TaskExited && recs.ExitCode != 0 &&
			p.Spec.RestartPolicy == v1.RestartPolicyNever {
			return true
		}
	}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		r := v.latest(sb, c.Name)
		if r == nil || r.State != pod.TaskExited || r.Hash != pod.ContainerHash(c) || restarts(p.Spec.RestartPolicy, r.ExitCode) {
			return false
		}
	}
	return len(p.Spec.Containers) > 0
}

// byID returns the record of container id, or nil.
func (v view) byID(id string) *pod.Record {
	for _, rs := range v.byName {
		for i := range rs {
			if rs[i].ID == id {
				return &rs[i]
			}
		}
	}
	return nil
}

// sandboxDead tells whether sandbox sb ran and exited.
func (v view) sandboxDead(sb string) bool {
	for _, s := range v.sandboxes {
		if s.ID == sb {
			return s.State == pod.TaskExited
		}
	}
	return false
}

// ran tells whether any container of sandbox sb has run: it runs, or it
// exited. One that was created and never started has not.
func (v view) ran(sb string) bool {
	for _, rs := range v.byName {
		for _, r := range rs {
			if r.SandboxID == sb && r.State != pod.TaskCreated {
				return true
			}
		}
	}
	return false
}

// latest returns the newest record of name in sandbox sb, or in any sandbox
// when sb is empty.
func (v view) latest(sb, name string) *pod.Record {
	for _, r := range v.byName[name] {
		if sb == "" || r.SandboxID == sb {
			return &r
		}
	}
	return nil
}

func (w *worker) streak(name string) *streak {
	s, ok := w.streaks[name]
	if !ok {
		s = &streak{}
		w.streaks[name] = s
	}
	return s
}

// waitingBackOff records that container name waits in CrashLoopBackOff and
// says so once per restart.
func (w *worker) waitingBackOff(p *pod.Pod, name string, until, now time.Time) {
	msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", until.Sub(now).Round(time.Second), name, p.Name)
	if cur, ok := w.waiting[name]; !ok || cur.reason != "CrashLoopBackOff" {
		w.event(name, pod.EventWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", name, p.Name))
	}
	w.waiting[name] = waitingState{reason: "CrashLoopBackOff", message: msg}
}

// apply carries out one step for container c: a container replaced is
// stopped after its preStop hook, and a container started counts as
// started once its postStart hook has returned.
func (w *worker) apply(ctx context.Context, p *pod.Pod, sb pod.Record, v view, c *v1.Container, kind pod.ContainerKind, st step) error {
	switch st.kind {
	case stepNone, stepWait:
		return nil
	case stepReplace:
		w.event(c.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s definition changed, will be restarted", c.Name))
		old := pod.Record{ID: st.id, Name: c.Name, Kind: kind}
		if r := v.byID(st.id); r != nil {
			old = *r
		}
		if err := w.stopContainer(ctx, old, w.replaceGrace(p), p); err != nil {
			return err
		}
		if err := w.rt.RemoveContainer(ctx, st.id); err != nil {
			return err
		}
		// The new spec starts without the old one's backoff.
		delete(w.streaks, c.Name)
	case stepClear:
		// Finished, not replaced: a start an earlier staticlet left under
		// way may still run it, and a second container would then run
		// the process twice.
		rec, err := w.rt.ResumeContainer(ctx, st.id)
		if err == nil {
			w.log.Debug("resumed a half-started container", "container", c.Name, "id", rec.ID, "state", rec.State)
			if rec.State != pod.TaskRunning {
				return nil // it ran and exited: the next pass decides
			}
			delete(w.waiting, c.Name)
			delete(w.attempts, c.Name)
			w.event(c.Name, pod.EventNormal, "Started", fmt.Sprintf("Started container %s (%s)", c.Name, shortID(rec.ID)))
			if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
				return w.postStart(ctx, rec, pod.ContainerRequest{Pod: p, Sandbox: sb, Container: c, Kind: kind, Attempt: rec.Attempt})
			}
			return nil
		}
		w.log.Debug("resuming a half-started container; starting a new one", "container", c.Name, "id", st.id, "err", err)
		if err := w.rt.RemoveContainer(ctx, st.id); err != nil {
			return err
		}
	}
	if retry := w.waiting[c.Name].retryAt; retry.After(w.now()) {
		return &retryLater{at: retry}
	}
	if err := w.ensureImage(ctx, p, sb, c); err != nil {
		return w.startFailed(p, c, err)
	}
	attempt := max(st.attempt, w.attempts[c.Name])
	start := time.Now()
	rec, err := w.rt.StartContainer(ctx, pod.ContainerRequest{Pod: p, Sandbox: sb, Container: c, Kind: kind, Attempt: attempt})
	w.log.Debug("started container", "container", c.Name, "took", time.Since(start), "err", err)
	if err != nil {
		return w.startFailed(p, c, err)
	}
	delete(w.waiting, c.Name)
	delete(w.attempts, c.Name)
	w.event(c.Name, pod.EventNormal, "Started", fmt.Sprintf("Started container %s (%s)", c.Name, shortID(rec.ID)))
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		return w.postStart(ctx, rec, pod.ContainerRequest{Pod: p, Sandbox: sb, Container: c, Kind: kind, Attempt: attempt})
	}
	return nil
}

// startFailed records why container c could not start, and when to try
// again: failed starts back off like crashes, so that a missing image is
// not pulled again every second.
func (w *worker) startFailed(p *pod.Pod, c *v1.Container, err error) error {
	reason := pod.WaitingReason(err, "CreateContainerError")
	cur := w.waiting[c.Name]
	if cur.message != err.Error() {
		w.event(c.Name, pod.EventWarning, "Failed", err.Error())
	}
	failures := cur.failures + 1
	retry := w.backoff.Delay(failures)
	if reason == "ErrImagePull" && failures > 1 {
		reason = "ImagePullBackOff"
		w.event(c.Name, pod.EventNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.Image))
	}
	w.waiting[c.Name] = waitingState{reason: reason, message: err.Error(), failures: failures, retryAt: w.now().Add(retry)}
	return &retryLater{at: w.now().Add(retry), err: fmt.Errorf("starting container %q of pod %s: %w", c.Name, p, err)}
}

// removeUnwanted stops and removes containers the spec no longer has, and
// all but the newest two records of each name (the newest is the current
// container, the one before it gives lastState and previous logs).
func (w *worker) removeUnwanted(ctx context.Context, p *pod.Pod, sb pod.Record, v view) error {
	want := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		want[c.Name] = true
	}
	for _, c := range p.Spec.Containers {
		want[c.Name] = true
	}
	var unwanted []pod.Record
	for name, rs := range v.byName {
		for i, r := range rs {
			if r.SandboxID != sb.ID {
				continue
			}
			if !want[name] || i >= 2 {
				unwanted = append(unwanted, r)
			}
		}
	}
	if len(unwanted) == 0 {
		return nil
	}
	return w.terminate(ctx, unwanted, w.replaceGrace(p), p)
}

// reportFresh lists the pod again and reports its status.
func (w *worker) reportFresh(ctx context.Context, p *pod.Pod, sb pod.Record) error {
	recs, err := w.rt.PodContainers(ctx, w.key)
	if err != nil {
		return err
	}
	v := newView(recs)
	if cur, ok := v.current(p); ok {
		sb = cur
	}
	w.setProbes(p, v, sb)
	w.report(p, v, sb)
	return nil
}

func (w *worker) report(p *pod.Pod, v view, sb pod.Record) {
	w.rep.SetPod(buildPod(statusInput{pod: p, view: v, sandbox: sb, sandboxDown: w.sbDown, waiting: w.waiting, hostIP: w.hostIP, now: w.now(),
		probes: w.probeSnapshot()}))
}

func (w *worker) event(container, typ, reason, msg string) {
	w.rep.Event(pod.Event{Time: w.now(), Pod: w.key.String(), Container: container, Type: typ, Reason: reason, Message: msg})
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
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
