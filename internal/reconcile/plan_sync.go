package reconcile

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// syncPass is what a pass that converges a desired pod knows as it goes.
type syncPass struct {
	p  *pod.Pod
	v  view
	sb pod.Record // the current sandbox
	ok bool       // sb exists and is kept
	d  sandboxDecision
	// startLater is set when the sandbox was created in this pass and its
	// pause is started after its containers; restart when its pause is
	// started again in place, after them too.
	startLater, restart bool
}

// beginSync starts a pass that converges pod p one step and reports its
// status.
func (c *podCore) beginSync(out []action, p *pod.Pod) []action {
	return c.await(out, listPod{}, func(o outcome) []action {
		l := o.(listed)
		if l.err != nil {
			return c.endSync(nil, p, 0, l.err)
		}
		return c.syncListed(p, newView(l.recs))
	})
}

// endSync ends a sync pass of p.
func (c *podCore) endSync(out []action, p *pod.Pod, again time.Duration, err error) []action {
	c.last = p
	return done(out, again, err)
}

// syncListed decides what the pod's sandbox needs, and clears away what
// belongs to no sandbox the pod keeps.
func (c *podCore) syncListed(p *pod.Pod, v view) []action {
	s := &syncPass{p: p, v: v}
	s.sb, s.ok = v.current(p)
	var out []action
	s.d, out = c.decideSandbox(out, p, v, s.sb, s.ok)
	switch s.d.step {
	case sandboxWait:
		if !s.ok || !inPlace(p, s.sb) {
			// Nothing of the pod runs without its sandbox: wait for it.
			due := c.sandboxDue()
			return c.relist(out, p, s.sb, func(out []action, err error) []action { return c.endSync(out, p, due, err) })
		}
		// The containers run on meanwhile.
	case sandboxRestart:
		s.restart = true
	case sandboxReplace:
		// The sandbox died under a pod that should still run: replace it.
		out = append(out, c.event(c.now, "", pod.EventNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created."))
		s.ok = false
	}
	keep, keepUID := "", ""
	if s.ok {
		keep, keepUID = s.sb.ID, s.sb.PodUID
	}
	stale := v.stale(keep)
	if len(stale) == 0 {
		return c.syncCreate(out, s)
	}
	c.noteAttempts(v, p)
	out = append(out, c.killing(stale)...)
	return c.await(out, c.stopAll(stale, c.replaceGrace(p), p, true), func(o outcome) []action {
		out, err := c.stoppedOutcome(o)
		if err != nil {
			return c.endSync(out, p, 0, err)
		}
		// The files of a replaced pod go with it; a sandbox re-created for
		// the same pod keeps them (emptyDir content survives, as with the
		// kubelet).
		var uids []string
		for _, r := range stale {
			if r.Kind == pod.KindSandbox && r.PodUID != string(p.UID) && r.PodUID != keepUID {
				uids = append(uids, r.PodUID)
			}
		}
		if len(uids) == 0 {
			return c.syncCreate(out, s)
		}
		return c.await(out, removeFiles{uids: uids}, func(o outcome) []action {
			for _, uid := range uids {
				if err := o.(filesRemoved).failed[uid]; err != nil {
					return c.endSync(nil, p, 0, fmt.Errorf("removing the files of replaced pod %s: %w", c.key, err))
				}
			}
			return c.syncCreate(nil, s)
		})
	})
}

// syncCreate creates the pod's sandbox when it has none to keep. The pause
// of a pod whose containers share its PID namespace starts at once; a
// sandbox made with a pause otherwise (by an earlier build, or a runtime
// that makes one) starts it after the containers, which join the pod's
// pinned namespaces by path: the app runs sooner, and two runc starts do
// not compete for the CPU. A sandbox without a pause process is up once
// made.
func (c *podCore) syncCreate(out []action, s *syncPass) []action {
	if s.ok {
		return c.syncContainers(out, s)
	}
	p := s.p
	wait, out := c.awaitDeps(out, p)
	if wait {
		due := max(c.order.since.Add(c.order.limit).Sub(c.now), time.Millisecond)
		return c.relist(out, p, pod.Record{}, func(out []action, err error) []action { return c.endSync(out, p, due, err) })
	}
	return c.create(out, s)
}

// create makes the pod's sandbox.
func (c *podCore) create(out []action, s *syncPass) []action {
	p := s.p
	c.sandbox.retry.attempted()
	return c.await(out, createSandbox{pod: p}, func(o outcome) []action {
		m := o.(sandboxMade)
		if m.err != nil {
			// Told of in an event; tried again after the backoff.
			out := c.sandboxFailed(nil, m.err)
			out = append(out, note{warn: true, msg: "creating the pod's sandbox", args: []any{"err", m.err}})
			due := c.sandboxDue()
			return c.relist(out, p, pod.Record{}, func(out []action, err error) []action { return c.endSync(out, p, due, err) })
		}
		s.sb, s.v = m.rec, newView([]pod.Record{m.rec})
		c.sandbox.termSent = false
		if m.rec.NoPause {
			c.sandbox.down = waitingState{}
			return c.syncContainers(nil, s)
		}
		if !sharesPID(p) {
			s.startLater = true
			return c.syncContainers(nil, s)
		}
		c.sandbox.retry.attempted()
		return c.await(nil, startSandbox{sb: m.rec}, func(o outcome) []action {
			st := o.(sandboxStarted)
			if st.err != nil {
				out := c.sandboxFailed(nil, st.err)
				out = append(out, note{warn: true, msg: "starting the pod's sandbox", args: []any{"err", st.err}})
				due := c.sandboxDue()
				return c.relist(out, p, st.rec, func(out []action, err error) []action { return c.endSync(out, p, due, err) })
			}
			c.sandbox.down = waitingState{}
			s.sb = st.rec
			return c.syncContainers(nil, s)
		})
	})
}

// syncContainers converges the pod's containers, then starts its pause
// when it is to start after them, and reports.
func (c *podCore) syncContainers(out []action, s *syncPass) []action {
	out = append(out, c.reportOOMKills(s.v)...)
	return c.converge(out, s.p, s.sb, s.v, func(out []action, again time.Duration, err error) []action {
		if !s.startLater && !s.restart {
			return c.syncReport(out, s, again, err)
		}
		c.sandbox.retry.attempted()
		return c.await(out, startSandbox{sb: s.sb}, func(o outcome) []action {
			st := o.(sandboxStarted)
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
			return c.syncReport(out, s, again, err)
		})
	})
}

// syncReport ends a sync pass with a fresh report.
func (c *podCore) syncReport(out []action, s *syncPass, again time.Duration, err error) []action {
	if s.d.step == sandboxWait {
		again = minAgain(again, s.d.until.Sub(c.now))
	}
	return c.relist(out, s.p, s.sb, func(out []action, lerr error) []action {
		if err == nil {
			err = lerr
		}
		return c.endSync(out, s.p, again, err)
	})
}

// relist lists the pod again, reports its status (sb is its sandbox
// unless the listing has a current one) and hands its running containers
// to the prober; then k goes on, with the listing's error.
func (c *podCore) relist(out []action, p *pod.Pod, sb pod.Record, k func(out []action, err error) []action) []action {
	return c.await(out, listPod{}, func(o outcome) []action {
		l := o.(listed)
		if l.err != nil {
			return k(nil, l.err)
		}
		v := newView(l.recs)
		if cur, ok := v.current(p); ok {
			sb = cur
		}
		out := c.setProbes(nil, p, v, sb)
		out = append(out, watchFiles{targets: p.WatchTargets()})
		return k(c.reportStatus(out, c.status(p, v, sb)), nil)
	})
}

// status is the pod's status as the kubelet would compute it.
func (c *podCore) status(p *pod.Pod, v view, sb pod.Record) *v1.Pod {
	return buildPod(statusInput{pod: p, view: v, sandbox: sb, sandboxDown: c.sandbox.down, waiting: c.mem.waiting, hostIP: c.hostIP, now: c.now,
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
