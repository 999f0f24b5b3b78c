package status

import (
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Subscription follows the changes of a Store's pods and its events, for
// one watcher. Writers never wait for it: they mark what changed and signal
// Changed without blocking, so a stuck subscriber costs the store nothing
// but the marks.
//
// For pods a subscription keeps the set of keys that changed since the last
// PodChanges, not the states in between: a subscriber that reads slowly
// loses intermediate states but always gets the latest one. The set is
// bounded by the number of pods.
//
// For events it keeps a cursor into the store's ring of recent events: a
// subscriber that falls more than the ring's size (1000 events) behind has
// lost events, which Events reports.
type Subscription struct {
	store *Store
	// changed holds one pending signal; more changes coalesce into it.
	changed chan struct{}

	// The fields below are guarded by store.mu.
	dirty  map[pod.Key]struct{} // pods changed since the last PodChanges
	cursor uint64               // sequence number of the next event to deliver
}

// PodChange is the state of one pod after it changed.
type PodChange struct {
	Key pod.Key
	// Pod is a copy of the pod as it is now, nil once it is deleted.
	Pod *v1.Pod
}

// Subscribe returns a new subscription. Its first PodChanges returns every
// pod the store holds, and its first Events every event it still keeps, so
// that a watcher starts from the whole current state without a gap. Call
// Close when done with it.
func (s *Store) Subscribe() *Subscription {
	sub := &Subscription{store: s, changed: make(chan struct{}, 1)}
	sub.changed <- struct{}{}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub.dirty = make(map[pod.Key]struct{}, len(s.pods))
	for k := range s.pods {
		sub.dirty[k] = struct{}{}
	}
	sub.cursor = s.events.seq
	if len(s.events.held) > 0 {
		sub.cursor = s.events.held[0].seq
	}
	s.subs[sub] = struct{}{}
	return sub
}

// Close ends the subscription; the store forgets it. It is safe to call
// more than once.
func (sub *Subscription) Close() {
	s := sub.store
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, sub)
	clear(sub.dirty)
}

// Changed returns a channel that receives a value after a pod changes, an
// event is recorded, or the node or the ConfigMaps and Secrets change.
// Changes made while a value is pending are coalesced into it: read
// PodChanges and Events (and whatever else the subscriber follows) after
// each value.
func (sub *Subscription) Changed() <-chan struct{} { return sub.changed }

// PodChanges returns the latest state of every pod that changed since the
// last call, sorted by namespace then name. A pod set to the same state
// again is reported again: telling whether anything visible changed is the
// caller's job.
func (sub *Subscription) PodChanges() []PodChange {
	s := sub.store
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PodChange, 0, len(sub.dirty))
	for k := range sub.dirty {
		c := PodChange{Key: k}
		if p, ok := s.pods[k]; ok {
			c.Pod = p.DeepCopy()
		}
		out = append(out, c)
	}
	clear(sub.dirty)
	slices.SortFunc(out, func(a, b PodChange) int {
		if c := strings.Compare(a.Key.Namespace, b.Key.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Key.Name, b.Key.Name)
	})
	return out
}

// Events returns the events recorded since the last call, oldest first,
// and how many events before them the store dropped from its ring before
// this subscriber read them (0 unless it fell behind by more than 1000).
// An event whose series expired before the subscriber read it is not
// returned.
func (sub *Subscription) Events() (events []RecordedEvent, lost uint64) {
	s := sub.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(time.Now())
	if sub.cursor < s.events.dropped {
		lost = s.events.dropped - sub.cursor
		sub.cursor = s.events.dropped
	}
	for _, h := range s.events.held {
		if h.seq >= sub.cursor {
			events = append(events, s.resolveLocked(h.RecordedEvent))
		}
	}
	sub.cursor = s.events.seq
	return events, lost
}

// signal wakes the subscriber without blocking.
func (sub *Subscription) signal() {
	select {
	case sub.changed <- struct{}{}:
	default:
	}
}

// podChangedLocked marks key changed for every subscriber. s.mu is held.
func (s *Store) podChangedLocked(key pod.Key) {
	for sub := range s.subs {
		sub.dirty[key] = struct{}{}
		sub.signal()
	}
}

// eventLocked tells every subscriber that an event was recorded. s.mu is
// held.
func (s *Store) eventLocked() {
	for sub := range s.subs {
		sub.signal()
	}
}

// othersChangedLocked wakes every subscriber after a change of what the
// store holds besides pods and events (the node, the ConfigMaps and
// Secrets), which a subscriber that cares reads again. s.mu is held.
func (s *Store) othersChangedLocked() {
	for sub := range s.subs {
		sub.signal()
	}
}
