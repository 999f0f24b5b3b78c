package reconcile

import (
	"slices"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// Pods that stop together stop in the reverse of the order they became
// Ready, and a pod that starts after others (staticlet.io/after) stops
// before them: a kube-apiserver goes before the etcd it needs, rather
// than hanging on a request to a dead etcd. A pod waits for those that
// stop before it for at most their grace period and a little more, so
// that one that cannot be stopped holds the others up only so long.

// holdSlack is what a pod waits for those that stop before it beyond the
// longest of their grace periods.
const holdSlack = 5 * time.Second

// readyBook is the loop's record of the pods' readiness.
type readyBook struct {
	seq   uint64
	at    map[pod.Key]uint64 // when each pod last became Ready, in turns of seq
	ready map[pod.Key]bool
}

func newReadyBook() *readyBook {
	return &readyBook{at: map[pod.Key]uint64{}, ready: map[pod.Key]bool{}}
}

// note records that pod key is Ready, or not; it tells whether that
// changed.
func (b *readyBook) note(key pod.Key, ready bool) bool {
	if b.ready[key] == ready {
		return false
	}
	if ready {
		b.seq++
		b.at[key] = b.seq
		b.ready[key] = true
	} else {
		delete(b.ready, key)
	}
	return true
}

// forget drops a pod that is gone.
func (b *readyBook) forget(key pod.Key) {
	delete(b.at, key)
	delete(b.ready, key)
}

// stopsBefore returns those of others that stop before pod key when they
// stop together: the pods that became Ready after it, and the pods that
// start after it; but not a pod key itself starts after, which stops after
// it whatever their readiness. pods holds the pods' specs, as last
// desired.
func stopsBefore(key pod.Key, others []pod.Key, pods map[pod.Key]*pod.Pod, b *readyBook) []pod.Key {
	needs := func(a, dep pod.Key) bool { return pods[a] != nil && slices.Contains(pods[a].AfterKeys(), dep) }
	var out []pod.Key
	for _, o := range others {
		switch {
		case o == key || needs(key, o):
		case needs(o, key), b.at[key] > 0 && b.at[o] > b.at[key]:
			out = append(out, o)
		}
	}
	return out
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
