package reconcile

import (
	"slices"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// Pods that stop together stop at once, each within its own grace
// period, unless one needs another: then the one that needs stops first.
// A pod needs those its staticlet.io/after annotation names, and those
// that serve a port on the node its spec reaches (pod.NodePorts): a
// kube-apiserver whose --etcd-servers names 127.0.0.1:2379 goes before
// the etcd that listens there, rather than hanging on a request to a dead
// etcd. The order comes from the specs alone, so it is the same however
// soon after their start the pods are removed, in whatever order they
// became Ready, and after a restart of staticlet. A pod waits for those
// that stop before it for at most their grace period and a little more,
// so that one that cannot be stopped holds the others up only so long.

// holdSlack is what a pod waits for those that stop before it beyond the
// longest of their grace periods.
const holdSlack = 5 * time.Second

// readyBook is the loop's record of which pods are Ready.
type readyBook struct {
	ready map[pod.Key]bool
}

func newReadyBook() *readyBook {
	return &readyBook{ready: map[pod.Key]bool{}}
}

// note records that pod key is Ready, or not; it tells whether that
// changed.
func (b *readyBook) note(key pod.Key, ready bool) bool {
	if b.ready[key] == ready {
		return false
	}
	if ready {
		b.ready[key] = true
	} else {
		delete(b.ready, key)
	}
	return true
}

// forget drops a pod that is gone.
func (b *readyBook) forget(key pod.Key) {
	delete(b.ready, key)
}

// stopGraph returns, for each of keys that stop together, those of keys
// that stop before it: the pods that need it. Declared needs
// (staticlet.io/after, which admits no cycle) come first; a need inferred
// from ports that would close a cycle is left out, so that no pod waits on
// itself. needsOf tells what orders each pod's stop; a pod it knows
// nothing of needs nothing and is needed by nothing.
func stopGraph(keys []pod.Key, needsOf func(pod.Key) (pod.StopNeeds, bool)) map[pod.Key][]pod.Key {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b pod.Key) int { return strings.Compare(a.String(), b.String()) })
	needs := make(map[pod.Key]pod.StopNeeds, len(keys))
	for _, k := range keys {
		if n, ok := needsOf(k); ok {
			needs[k] = n
		}
	}
	before := map[pod.Key][]pod.Key{}
	// leadsTo tells whether from must stop before to along the needs
	// added so far.
	var leadsTo func(from, to pod.Key, seen map[pod.Key]bool) bool
	leadsTo = func(from, to pod.Key, seen map[pod.Key]bool) bool {
		if from == to {
			return true
		}
		seen[from] = true
		for _, n := range before[from] {
			if !seen[n] && leadsTo(n, to, seen) {
				return true
			}
		}
		return false
	}
	// need records that a needs b: a stops before b.
	need := func(a, b pod.Key) {
		if a == b || slices.Contains(before[b], a) || leadsTo(a, b, map[pod.Key]bool{}) {
			return
		}
		before[b] = append(before[b], a)
	}
	for _, a := range keys {
		for _, b := range needs[a].After {
			if slices.Contains(keys, b) {
				need(a, b)
			}
		}
	}
	for _, a := range keys {
		if len(needs[a].Ports.Reaches) == 0 {
			continue
		}
		for _, b := range keys {
			if a != b && needs[a].Ports.Needs(needs[b].Ports) {
				need(a, b)
			}
		}
	}
	return before
}

// needsOf tells what orders pod key's stop: its spec says, or, for a pod
// found at start with no manifest, its containers' labels.
func (l *loop) needsOf(key pod.Key) (pod.StopNeeds, bool) {
	if p := l.pods[key]; p != nil {
		return p.StopNeeds(), true
	}
	n, ok := l.rm.orphans[key]
	return n, ok
}

// hold is a pod whose removal waits for the pods that stop before it.
type hold struct {
	before []pod.Key
	until  time.Time // it goes then, whatever is left
}

// depsOf returns whether each pod p starts after is Ready, by the name p's
// annotation gives it; nil when p names none.
func depsOf(p *pod.Pod, b *readyBook) map[string]bool {
	names := p.After()
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]bool, len(names))
	for i, k := range p.AfterKeys() {
		out[names[i]] = b.ready[k]
	}
	return out
}

// maxGrace is the longest termination grace period among keys' pods.
func maxGrace(keys []pod.Key, pods map[pod.Key]*pod.Pod) time.Duration {
	var g time.Duration
	for _, k := range keys {
		g = max(g, podGrace(pods[k]))
	}
	return g
}
