package reconcile

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// syncPass is what a pass that converges a desired pod (pass.p) knows
// as it goes.
type syncPass struct {
	v  view
	sb pod.Record // the current sandbox
	ok bool       // sb exists and is kept
	d  sandboxDecision
	// startLater is set when the sandbox was created in this pass and its
	// pause is started after its containers; restart when its pause is
	// started again in place, after them too.
	startLater, restart bool
	// keepUID is the pod UID of the sandbox kept, whose files stay.
	keepUID string
	// reportSB is the sandbox the next report tells of, unless the
	// listing has a current one.
	reportSB pod.Record
	// again is how soon to look again, once the pass has reported.
	again time.Duration
}

// beginSync starts a pass that converges pod p one step and reports its
// status.
func (c *podCore) beginSync(out []action, p *pod.Pod) []action {
	c.pass.p = p
	return c.wait(out, atSyncList, listPod{})
}

// endSync ends a sync pass.
func (c *podCore) endSync(out []action, again time.Duration, err error) []action {
	c.last = c.pass.p
	return done(out, again, err)
}

// syncListed decides what the pod's sandbox needs, and clears away what
// belongs to no sandbox the pod keeps.
func (c *podCore) syncListed(l listed) []action {
	p := c.pass.p
	if l.err != nil {
		return c.endSync(nil, 0, l.err)
	}
	s := &c.pass.sync
	s.v = newView(l.recs)
	s.sb, s.ok = s.v.current(p)
	var out []action
	s.d, out = c.decideSandbox(out, p, s.v, s.sb, s.ok)
	switch s.d.step {
	case sandboxWait:
		if !s.ok || !inPlace(p, s.sb) {
			// Nothing of the pod runs without its sandbox: wait for it.
			return c.report(out, s.sb, c.sandboxDue(), nil)
		}
		// The containers run on meanwhile.
	case sandboxRestart:
		s.restart = true
	case sandboxReplace:
		// The sandbox died under a pod that should still run: replace it.
		out = append(out, c.event(c.now, "", pod.EventNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created."))
		s.ok = false
	}
	keep := ""
	if s.ok {
		keep, s.keepUID = s.sb.ID, s.sb.PodUID
	}
	stale := s.v.stale(keep)
	if len(stale) == 0 {
		return c.syncCreate(out)
	}
	c.noteAttempts(s.v, p)
	c.pass.recs = stale
	out = append(out, c.killing(stale)...)
	return c.wait(out, atSyncStopStale, c.stopAll(stale, c.replaceGrace(p), p, true))
}

// staleStopped removes the files of the pods whose sandboxes were
// stopped: the files of a replaced pod go with it; a sandbox re-created
// for the same pod keeps them (emptyDir content survives, as with the
// kubelet).
func (c *podCore) staleStopped(st stopped) []action {
	out, err := c.stoppedEvents(st)
	if err != nil {
		return c.endSync(out, 0, err)
	}
	p := c.pass.p
	var uids []string
	for _, r := range c.pass.recs {
		if r.Kind == pod.KindSandbox && r.PodUID != string(p.UID) && r.PodUID != c.pass.sync.keepUID {
			uids = append(uids, r.PodUID)
		}
	}
	if len(uids) == 0 {
		return c.syncCreate(out)
	}
	c.pass.uids = uids
	return c.wait(out, atSyncRemoveStale, removeFiles{uids: uids})
}

// staleFilesRemoved goes on to the sandbox once the stale files are gone.
func (c *podCore) staleFilesRemoved(fr filesRemoved) []action {
	for _, uid := range c.pass.uids {
		if err := fr.failed[uid]; err != nil {
			return c.endSync(nil, 0, fmt.Errorf("removing the files of replaced pod %s: %w", c.key, err))
		}
	}
	return c.syncCreate(nil)
}

// syncCreate creates the pod's sandbox when it has none to keep. The pause
// of a pod whose containers share its PID namespace starts at once; a
// sandbox made with a pause otherwise (by an earlier build, or a runtime
// that makes one) starts it after the containers, which join the pod's
// pinned namespaces by path: the app runs sooner, and two runc starts do
// not compete for the CPU. A sandbox without a pause process is up once
// made.
func (c *podCore) syncCreate(out []action) []action {
	if c.pass.sync.ok {
		return c.syncContainers(out)
	}
	if c.order.leaving {
		// The manifest went during the pass: no sandbox is made for it.
		return c.report(out, pod.Record{}, 0, nil)
	}
	wait, out := c.awaitDeps(out, c.pass.p)
	if wait {
		due := max(c.order.since.Add(c.order.limit).Sub(c.now), time.Millisecond)
		return c.report(out, pod.Record{}, due, nil)
	}
	c.sandbox.retry.attempted()
	return c.wait(out, atSyncCreate, createSandbox{pod: c.pass.p})
}

// sandboxCreated starts the pause of the sandbox made, or goes on to the
// containers.
func (c *podCore) sandboxCreated(m sandboxMade) []action {
	if m.err != nil {
		// Told of in an event; tried again after the backoff.
		out := c.sandboxFailed(nil, m.err)
		out = append(out, note{warn: true, msg: "creating the pod's sandbox", args: []any{"err", m.err}})
		return c.report(out, pod.Record{}, c.sandboxDue(), nil)
	}
	s := &c.pass.sync
	s.sb, s.v = m.rec, newView([]pod.Record{m.rec})
	c.sandbox.termSent = false
	if m.rec.NoPause {
		c.sandbox.down = waitingState{}
		return c.syncContainers(nil)
	}
	if !sharesPID(c.pass.p) {
		s.startLater = true
		return c.syncContainers(nil)
	}
	c.sandbox.retry.attempted()
	return c.wait(nil, atSyncStartPause, startSandbox{sb: m.rec})
}

// pauseStarted goes on to the containers once the pause process runs.
func (c *podCore) pauseStarted(st sandboxStarted) []action {
	if st.err != nil {
		out := c.sandboxFailed(nil, st.err)
		out = append(out, note{warn: true, msg: "starting the pod's sandbox", args: []any{"err", st.err}})
		return c.report(out, st.rec, c.sandboxDue(), nil)
	}
	c.sandbox.down = waitingState{}
	c.pass.sync.sb = st.rec
	return c.syncContainers(nil)
}

// syncContainers brings the files of the pod's configMap, secret and
// projected volumes up to date with its objects (plan_volumes.go), then
// converges its containers (plan_converge.go), which then hands on to
// converged.
func (c *podCore) syncContainers(out []action) []action {
	out = append(out, c.reportOOMKills(c.pass.sync.v)...)
	if a, ok := c.volumesToSync(); ok {
		return c.wait(out, atSyncVolumes, a)
	}
	return c.objectsChanged(out)
}

// converged starts the pause when it is to start after the containers,
// and reports; again and err are what converging the containers came to.
func (c *podCore) converged(out []action, again time.Duration, err error) []action {
	s := &c.pass.sync
	if !s.startLater && !s.restart {
		return c.syncReport(out, again, err)
	}
	c.sandbox.retry.attempted()
	s.again, c.pass.err = again, err
	return c.wait(out, atSyncStartLater, startSandbox{sb: s.sb})
}

// pauseStartedLater reports once the pause started after the containers
// runs, or failed to.
func (c *podCore) pauseStartedLater(st sandboxStarted) []action {
	s := &c.pass.sync
	again, err := s.again, c.pass.err
	var out []action
	if st.err != nil {
		// Told of in an event; tried again after the backoff.
		out = c.sandboxFailed(out, st.err)
		out = append(out, note{warn: true, msg: "starting the pod's sandbox", args: []any{"err", st.err}})
		again = minAgain(again, c.sandboxDue())
	} else {
		c.sandbox.down = waitingState{}
		if s.restart {
			out = append(out, c.event(c.now, "", pod.EventNormal, "SandboxStarted",
				fmt.Sprintf("Started pod sandbox %s again (pause process %d); the pod's containers kept running", shortID(s.sb.ID), st.rec.Pid)))
		}
		s.sb = st.rec
	}
	return c.syncReport(out, again, err)
}

// syncReport ends a sync pass with a fresh report.
func (c *podCore) syncReport(out []action, again time.Duration, err error) []action {
	s := &c.pass.sync
	if s.d.step == sandboxWait {
		again = minAgain(again, s.d.until.Sub(c.now))
	}
	return c.report(out, s.sb, again, err)
}

// report lists the pod again to report its status (sb is its sandbox
// unless the listing has a current one), then ends the pass with again
// and err, or the listing's error when err is nil.
func (c *podCore) report(out []action, sb pod.Record, again time.Duration, err error) []action {
	c.pass.sync.again, c.pass.err = again, err
	return c.relist(out, atSyncReport, sb)
}

// reported ends the pass once reported.
func (c *podCore) reported(l listed) []action {
	out, err := c.relisted(l)
	if c.pass.err != nil {
		err = c.pass.err
	}
	return c.endSync(out, c.pass.sync.again, err)
}

// relist lists the pod again, as stage at, for a report of its status
// that tells of sandbox sb unless the listing has a current one.
func (c *podCore) relist(out []action, at stage, sb pod.Record) []action {
	c.pass.sync.reportSB = sb
	return c.wait(out, at, listPod{})
}

// relisted reports the status relist listed and hands the pod's running
// containers to the prober; it returns the listing's error.
func (c *podCore) relisted(l listed) ([]action, error) {
	if l.err != nil {
		return nil, l.err
	}
	p, sb := c.pass.p, c.pass.sync.reportSB
	v := newView(l.recs)
	if cur, ok := v.current(p); ok {
		sb = cur
	}
	// A kill the listing shows is told before the status that shows it.
	out := c.reportOOMKills(v)
	out = c.setProbes(out, p, v, sb)
	out = append(out, watchFiles{targets: p.WatchTargets()})
	return c.reportStatus(out, c.status(p, v, sb)), nil
}

// status is the pod's status as the kubelet would compute it.
func (c *podCore) status(p *pod.Pod, v view, sb pod.Record) *v1.Pod {
	return buildPod(statusInput{pod: p, view: v, sandbox: sb, sandboxDown: c.sandbox.down, waiting: c.mem.waiting, hostIPs: c.hostIPs, now: c.now,
		probes: c.probes.results})
}

// sharesPID tells whether p's containers join their sandbox's PID namespace.
func sharesPID(p *pod.Pod) bool {
	return !p.Spec.HostPID && p.Spec.ShareProcessNamespace != nil && *p.Spec.ShareProcessNamespace
}

// reportOOMKills tells in a Warning event of each container found
// OOM-killed since the core began, once.
func (c *podCore) reportOOMKills(v view) []action {
	var out []action
	seen := map[string]bool{}
	for _, name := range v.names() {
		for _, r := range v.byName[name] {
			if !r.OOMKilled {
				continue
			}
			seen[r.ID] = true
			if c.oomSeen != nil && !c.oomSeen[r.ID] {
				out = append(out, c.event(c.now, name, pod.EventWarning, "OOMKilled",
					fmt.Sprintf("Container %s was killed by the kernel's OOM killer: it ran out of memory (exit code %d)", name, r.ExitCode)))
			}
		}
	}
	// Only containers still there need remembering.
	c.oomSeen = seen
	return out
}

// noteAttempts remembers restart counts before a dead sandbox of the same
// pod is replaced, so that restartCount keeps counting across it. A pod
// whose spec changed starts counting afresh, as with the kubelet.
func (c *podCore) noteAttempts(v view, p *pod.Pod) {
	for _, s := range v.sandboxes {
		if s.Hash != p.SandboxHash {
			continue
		}
		for name, rs := range v.byName {
			for _, r := range rs {
				if r.SandboxID == s.ID && r.Attempt+1 > c.mem.attempts[name] {
					c.mem.attempts[name] = r.Attempt + 1
				}
			}
		}
	}
}
