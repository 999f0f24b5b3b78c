package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// RecordedEvent is an event as the store keeps it: with the revision it
// was recorded at and the series of repeats it ends, which the Kubernetes
// API shows as one Event with a count, as the kubelet's event recorder
// makes one.
type RecordedEvent struct {
	pod.Event
	// Rev is the store revision the event was recorded at, from the
	// counter that numbers the pods' changes.
	Rev uint64 `json:"rev,omitempty"`
	// UID is the UID of the event's pod when it was recorded, or else
	// when it was read; empty for a node event or a pod the store did not
	// hold.
	UID string `json:"uid,omitempty"`
	// First is the time of the first event of the series: the events
	// still in the store with the same pod, UID, object, container, type,
	// reason and message. Count is how many there are, this one included.
	First time.Time `json:"firstTime,omitzero"`
	Count int32     `json:"count,omitempty"`
	// FieldPath is how the event's container is named in its pod's spec
	// when it was read (spec.initContainers{NAME} for an init
	// container's); empty for an event of no container.
	FieldPath string `json:"fieldPath,omitempty"`
}

// eventKey is what makes events repeats of each other.
type eventKey struct {
	pod, uid, object, container, typ, reason, message string
}

func keyOf(e *RecordedEvent) eventKey {
	return eventKey{e.Pod, e.UID, e.Object, e.Container, e.Type, e.Reason, e.Message}
}

// eventSeries is where a series stands: its first time, its count, and
// the revision of its latest event.
type eventSeries struct {
	first time.Time
	count int32
	rev   uint64
}

// eventRing is the store's recent events, the most recent maxEvents,
// oldest dropped first. Guarded by Store.mu.
type eventRing struct {
	ring []RecordedEvent // len <= maxEvents
	next int             // index in ring of the next write once full
	seq  uint64          // how many events were ever recorded
	// floor is the revision after which every event recorded is in ring.
	floor uint64
	// series are the series of the events in ring. A series whose events
	// have all been dropped is forgotten: a repeat starts a new one, as
	// the kubelet's recorder forgets what its cache evicts.
	series map[eventKey]*eventSeries
}

func newEventRing(rev uint64) eventRing {
	return eventRing{floor: rev, series: map[eventKey]*eventSeries{}}
}

// add records e, which has its revision, counting it in its series.
func (r *eventRing) add(e RecordedEvent) {
	k := keyOf(&e)
	s, ok := r.series[k]
	if !ok {
		s = &eventSeries{first: e.Time}
		r.series[k] = s
	}
	s.count++
	s.rev = e.Rev
	e.First, e.Count = s.first, s.count
	r.seq++
	if len(r.ring) < maxEvents {
		r.ring = append(r.ring, e)
		return
	}
	old := &r.ring[r.next]
	r.floor = old.Rev
	if last := r.series[keyOf(old)]; last != nil && last.rev == old.Rev {
		delete(r.series, keyOf(old)) // its latest event goes: all of it has
	}
	r.ring[r.next] = e
	r.next = (r.next + 1) % maxEvents
}

// at returns the i-th oldest event.
func (r *eventRing) at(i int) RecordedEvent {
	// Once the ring is full, r.next is the oldest entry; before, it is 0,
	// the index of the oldest too.
	return r.ring[(r.next+i)%len(r.ring)]
}

// since returns the events recorded after revision rev, oldest first.
func (r *eventRing) since(rev, current uint64) ([]RecordedEvent, error) {
	if rev < r.floor || rev > current {
		return nil, fmt.Errorf("resource version %d (events are kept from %d to %d): %w", rev, r.floor, current, ErrRevisionGone)
	}
	var out []RecordedEvent
	for i := range r.ring {
		if e := r.at(i); e.Rev > rev {
			out = append(out, e)
		}
	}
	return out, nil
}

// Event records e, dropping the oldest event when the store already holds
// the most recent 1000. It gives e the next revision. It does not log:
// the caller does.
func (s *Store) Event(e pod.Event) {
	s.mu.Lock()
	s.revs.rev++
	r := RecordedEvent{Event: e, Rev: s.revs.rev}
	if ns, name, ok := strings.Cut(e.Pod, "/"); ok {
		if p, ok := s.pods[pod.Key{Namespace: ns, Name: name}]; ok {
			r.UID = string(p.UID)
		}
	}
	s.events.add(r)
	s.eventLocked()
	s.mu.Unlock()
	s.notify()
}

// Events returns the recorded events, oldest first. An empty podFilter
// returns all of them; "namespace/name" the events of that pod; a bare name
// the events of pods with that name in any namespace.
func (s *Store) Events(podFilter string) []pod.Event {
	recorded := s.RecordedEvents(podFilter)
	out := make([]pod.Event, len(recorded))
	for i := range recorded {
		out[i] = recorded[i].Event
	}
	return out
}

// RecordedEvents is Events with each event's revision, series and pod,
// what CoreEvent makes an Event of.
func (s *Store) RecordedEvents(podFilter string) []RecordedEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordedLocked(podFilter)
}

// recordedLocked is RecordedEvents with s.mu held.
func (s *Store) recordedLocked(podFilter string) []RecordedEvent {
	out := make([]RecordedEvent, 0, len(s.events.ring))
	for i := range s.events.ring {
		if e := s.events.at(i); matchPod(e.Pod, podFilter) {
			out = append(out, s.resolveLocked(e))
		}
	}
	return out
}

// EventsAt returns every recorded event, oldest first, and the store's
// revision they are the state at.
func (s *Store) EventsAt() ([]RecordedEvent, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordedLocked(""), s.revs.rev
}

// EventsSince returns the events recorded after revision rev, oldest
// first, or ErrRevisionGone when the store has dropped some of them.
func (s *Store) EventsSince(rev uint64) ([]RecordedEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.events.since(rev, s.revs.rev)
	for i := range out {
		out[i] = s.resolveLocked(out[i])
	}
	return out, err
}

// resolveLocked is e with what the store's pods tell of it now: the UID
// of a pod stored only after e was recorded, and the field path of e's
// container. s.mu is held.
func (s *Store) resolveLocked(e RecordedEvent) RecordedEvent {
	ns, name, ok := strings.Cut(e.Pod, "/")
	if !ok {
		return e
	}
	p := s.pods[pod.Key{Namespace: ns, Name: name}]
	if e.UID == "" && p != nil {
		e.UID = string(p.UID)
	}
	if e.Container != "" {
		e.FieldPath = ContainerFieldPath(p, e.Container)
	}
	return e
}
