package reconcile

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// view is one pod's containers as the runtime reports them, grouped.
type view struct {
	sandboxes []pod.Record            // newest first
	byName    map[string][]pod.Record // per container name, newest attempt first
}

func newView(recs []pod.Record) view {
	v := view{byName: map[string][]pod.Record{}}
	for _, r := range recs {
		if r.Kind == pod.KindSandbox {
			v.sandboxes = append(v.sandboxes, r)
			continue
		}
		v.byName[r.Name] = append(v.byName[r.Name], r)
	}
	sort.Slice(v.sandboxes, func(i, j int) bool { return v.sandboxes[i].CreatedAt.After(v.sandboxes[j].CreatedAt) })
	for _, rs := range v.byName {
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].Attempt != rs[j].Attempt {
				return rs[i].Attempt > rs[j].Attempt
			}
			return rs[i].CreatedAt.After(rs[j].CreatedAt)
		})
	}
	return v
}

// current returns the newest sandbox made for p's spec, running or not.
func (v view) current(p *pod.Pod) (pod.Record, bool) {
	for _, s := range v.sandboxes {
		if s.Hash == p.SandboxHash {
			return s, true
		}
	}
	return pod.Record{}, false
}

// stale lists what does not belong to sandbox keep: other sandboxes and
// their containers. With keep empty, everything is stale.
func (v view) stale(keep string) []pod.Record {
	var out []pod.Record
	for _, s := range v.sandboxes {
		if s.ID != keep {
			out = append(out, s)
		}
	}
	for _, rs := range v.byName {
		for _, r := range rs {
			if r.SandboxID != keep {
				out = append(out, r)
			}
		}
	}
	return out
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

// names returns the container names in v, sorted.
func (v view) names() []string {
	out := make([]string, 0, len(v.byName))
	for name := range v.byName {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// in returns the records of container name in sandbox sb, newest first.
func (v view) in(sb, name string) []pod.Record {
	var out []pod.Record
	for _, r := range v.byName[name] {
		if r.SandboxID == sb {
			out = append(out, r)
		}
	}
	return out
}

// stepKind is what a container needs next.
type stepKind int

const (
	stepNone    stepKind = iota // running as specified, or finished for good
	stepStart                   // start attempt
	stepWait                    // exited, restart allowed at until
	stepReplace                 // running or exited with an old spec: stop and remove id, then start attempt
	stepClear                   // created but never ran (staticlet died mid-start): remove id, then start attempt
)

// step is the decision for one container.
type step struct {
	kind    stepKind
	id      string
	attempt int
	until   time.Time
}

// decideContainer decides what container c of a pod needs, given its
// records in the current sandbox (newest first), the pod's restart policy,
// and the restart streak. It is the heart of the reconciler and pure.
func decideContainer(c *v1.Container, recs []pod.Record, policy v1.RestartPolicy, b Backoff, s *streak, now time.Time) step {
	if len(recs) == 0 {
		return step{kind: stepStart}
	}
	last := recs[0]
	if last.Hash != pod.ContainerHash(c) {
		return step{kind: stepReplace, id: last.ID, attempt: last.Attempt + 1}
	}
	switch last.State {
	case pod.TaskRunning:
		return step{kind: stepNone}
	case pod.TaskCreated:
		return step{kind: stepClear, id: last.ID, attempt: last.Attempt}
	}
	if !restarts(policy, last.ExitCode) {
		return step{kind: stepNone}
	}
	until := b.next(s, last.ID, last.StartedAt, last.FinishedAt)
	if until.After(now) {
		return step{kind: stepWait, until: until, attempt: last.Attempt + 1}
	}
	return step{kind: stepStart, attempt: last.Attempt + 1}
}

// restarts tells whether a container that exited with code is restarted
// under policy.
func restarts(policy v1.RestartPolicy, code int32) bool { return pod.RunsAgain(policy, code) }

// initPolicy is the restart policy of an init container: it never restarts
// after success; after failure, unless the pod's policy is Never.
func initPolicy(p v1.RestartPolicy) v1.RestartPolicy {
	if p == v1.RestartPolicyNever {
		return v1.RestartPolicyNever
	}
	return v1.RestartPolicyOnFailure
}
