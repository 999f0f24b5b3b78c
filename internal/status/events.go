package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// DefaultEventTTL is how long the store keeps an event after its last
// occurrence: the apiserver's default --event-ttl.
const DefaultEventTTL = time.Hour

// The kubelet's event correlation (client-go's tools/record), which the
// store applies to the events it records.
const (
	// combineAfter is how many different messages of similar events
	// (the same object, type, reason and source) make the aggregator
	// record the one that brings their number to it, and those after it,
	// as one combined event.
	combineAfter = 10
	// combineWindow is how long the aggregator remembers similar events
	// after the latest of them.
	combineWindow = 10 * time.Minute
	// combinedPrefix starts the message of a combined event, which ends
	// with the message of its latest occurrence.
	combinedPrefix = "(combined from similar events): "
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
	// reason and message (or, for a combined event, the same pod, UID,
	// object, type and reason). Count is how many there are, this one
	// included.
	First time.Time `json:"firstTime,omitzero"`
	Count int32     `json:"count,omitempty"`
	// FieldPath is how the event's container is named in its pod's spec
	// when it was read (spec.initContainers{NAME} for an init
	// container's); empty for an event of no container.
	FieldPath string `json:"fieldPath,omitempty"`
}

// EventChange is one change of the store's events after a revision, as a
// watch that resumes from it must hear of it.
type EventChange struct {
	// Type is WatchAdded for the first event of a series, WatchModified
	// for a repeat, WatchDeleted for the removal of a series, expired or
	// pushed out by newer events.
	Type WatchEventType
	// Event is the event recorded; for a removal, the latest event of the
	// series with the revision of its removal.
	Event RecordedEvent
}

// eventKey is what makes events repeats of each other.
type eventKey struct {
	pod, uid, object, container, typ, reason, message string
	// combined marks the series of combined events of similar ones,
	// whose container and message are not part of the key.
	combined bool
}

// similarKey is what makes events similar: they differ at most by
// message and container, as the kubelet's aggregator keys them.
type similarKey struct {
	pod, uid, object, typ, reason string
}

// similarEvents are the different messages of recent similar events.
type similarEvents struct {
	messages map[string]bool
	last     time.Time
}

// eventSeries is where a series stands.
type eventSeries struct {
	first time.Time
	count int32
	// firstRev and rev are the revisions of its first and latest events.
	firstRev, rev uint64
	// expires is when its latest event expires: the store's time when it
	// was recorded, plus the TTL.
	expires time.Time
	// container is that of its first event, which a combined series
	// keeps, as the apiserver keeps the involvedObject the aggregator
	// created it with.
	container string
}

// heldEvent is an event in the store.
type heldEvent struct {
	RecordedEvent
	key eventKey
	// seq numbers the events in the order they were recorded, for the
	// subscriptions' cursors.
	seq uint64
}

// eventRemoval is the removal of a series, for the watches that resume
// from before it.
type eventRemoval struct {
	// rev is the revision of the removal; last is the series' latest
	// event; firstRev the revision of its first one.
	rev, firstRev uint64
	last          RecordedEvent
}

// eventRing is the store's recent events: the most recent maxEvents
// whose series has not expired, oldest first. Guarded by Store.mu.
type eventRing struct {
	held []heldEvent // len <= maxEvents, by revision
	seq  uint64      // how many events were ever recorded
	// dropped is the seq after the latest event the cap on their number
	// pushed out: every event before it has left.
	dropped uint64
	// removals are the latest removals of series, oldest first, len <=
	// maxEvents.
	removals []eventRemoval
	// floor is the revision after which the store knows the latest state
	// of every series: its latest event, or its removal.
	floor uint64
	// series are the series of the events in held. A series that leaves
	// is forgotten: a repeat starts a new one.
	series  map[eventKey]*eventSeries
	similar map[similarKey]*similarEvents
	// ttl is how long a series stays after its latest event.
	ttl time.Duration
	// timer is the store's one timer, set for the next expiry at; gen
	// tells its firing from that of a timer it replaced.
	timer *time.Timer
	at    time.Time
	gen   uint64
}

func newEventRing(rev uint64) eventRing {
	return eventRing{floor: rev, series: map[eventKey]*eventSeries{}, similar: map[similarKey]*similarEvents{}, ttl: DefaultEventTTL}
}

// StoreOption configures a Store that NewStore makes.
type StoreOption func(*Store)

// WithEventTTL makes the store keep an event for ttl after the latest
// event of its series instead of DefaultEventTTL; a ttl of 0 or less
// keeps the default.
func WithEventTTL(ttl time.Duration) StoreOption {
	return func(s *Store) {
		if ttl > 0 {
			s.events.ttl = ttl
		}
	}
}

// correlate returns the series key of e, recorded at now, making e a
// combined event when the aggregator combines it with similar ones.
func (r *eventRing) correlate(e *RecordedEvent, now time.Time) eventKey {
	for k, sim := range r.similar {
		if now.Sub(sim.last) > combineWindow {
			delete(r.similar, k)
		}
	}
	sk := similarKey{e.Pod, e.UID, e.Object, e.Type, e.Reason}
	sim := r.similar[sk]
	if sim == nil {
		sim = &similarEvents{messages: map[string]bool{}}
		r.similar[sk] = sim
	}
	sim.messages[e.Message] = true
	sim.last = now
	if len(sim.messages) < combineAfter {
		return eventKey{e.Pod, e.UID, e.Object, e.Container, e.Type, e.Reason, e.Message, false}
	}
	// The set stays below the threshold, so that the next new message is
	// combined too. client-go forgets an arbitrary message; forgetting
	// this one combines its repeats as well, the same every time.
	delete(sim.messages, e.Message)
	e.Message = combinedPrefix + e.Message
	return eventKey{pod: e.Pod, uid: e.UID, object: e.Object, typ: e.Type, reason: e.Reason, combined: true}
}

// add holds e, which has its revision, in series k until expires,
// counting it in its series. When that pushes out the latest event of a
// series, add returns the series' removal, which the caller gives a
// revision.
func (r *eventRing) add(e RecordedEvent, k eventKey, expires time.Time) (eventRemoval, bool) {
	s, ok := r.series[k]
	if !ok {
		s = &eventSeries{first: e.Time, firstRev: e.Rev, container: e.Container}
		r.series[k] = s
	}
	if k.combined {
		e.Container = s.container
	}
	s.count++
	s.rev, s.expires = e.Rev, expires
	e.First, e.Count = s.first, s.count
	r.held = append(r.held, heldEvent{RecordedEvent: e, key: k, seq: r.seq})
	r.seq++
	if len(r.held) <= maxEvents {
		return eventRemoval{}, false
	}
	old := r.held[0]
	r.held = slices.Delete(r.held, 0, 1)
	r.dropped = old.seq + 1
	if s := r.series[old.key]; s.rev == old.Rev { // its latest event goes: all of it has
		delete(r.series, old.key)
		return eventRemoval{firstRev: s.firstRev, last: old.RecordedEvent}, true
	}
	return eventRemoval{}, false
}

// expire removes the series whose latest event expired by now, and
// returns their removals, which the caller gives revisions.
func (r *eventRing) expire(now time.Time) []eventRemoval {
	if r.timer != nil && now.Before(r.at) {
		return nil // the timer is set for the next expiry: none is due
	}
	var out []eventRemoval
	for k, s := range r.series {
		if now.Before(s.expires) {
			continue
		}
		delete(r.series, k)
		i := slices.IndexFunc(r.held, func(h heldEvent) bool { return h.Rev == s.rev })
		out = append(out, eventRemoval{firstRev: s.firstRev, last: r.held[i].RecordedEvent})
	}
	if len(out) == 0 {
		return nil
	}
	r.held = slices.DeleteFunc(r.held, func(h heldEvent) bool { return r.series[h.key] == nil })
	// Removed in the order their series were last recorded, as an
	// apiserver would expire them.
	slices.SortFunc(out, func(a, b eventRemoval) int { return cmp.Compare(a.last.Rev, b.last.Rev) })
	return out
}

// remember keeps removal, given revision rev, for the watches that
// resume from before it.
func (r *eventRing) remember(removal eventRemoval, rev uint64) {
	removal.rev = rev
	r.removals = append(r.removals, removal)
	if len(r.removals) > maxEvents {
		r.floor = r.removals[0].rev
		r.removals = slices.Delete(r.removals, 0, 1)
	}
}

// nextExpiry returns when the next series expires, and false when the
// store holds none.
func (r *eventRing) nextExpiry() (time.Time, bool) {
	var next time.Time
	for _, s := range r.series {
		if next.IsZero() || s.expires.Before(next) {
			next = s.expires
		}
	}
	return next, !next.IsZero()
}

// since returns the changes after revision rev, oldest first: the events
// recorded after it and still held, and the removals after it of series
// that began at or before it (a watcher never told of a series needs no
// word of its removal).
func (r *eventRing) since(rev, current uint64) ([]EventChange, error) {
	if rev < r.floor || rev > current {
		return nil, fmt.Errorf("resource version %d (events are kept from %d to %d): %w", rev, r.floor, current, ErrRevisionGone)
	}
	var out []EventChange
	for _, h := range r.held {
		if h.Rev > rev {
			typ := WatchModified
			if h.Count == 1 {
				typ = WatchAdded
			}
			out = append(out, EventChange{Type: typ, Event: h.RecordedEvent})
		}
	}
	for _, m := range r.removals {
		if m.rev > rev && m.firstRev <= rev {
			e := m.last
			e.Rev = m.rev
			out = append(out, EventChange{Type: WatchDeleted, Event: e})
		}
	}
	slices.SortStableFunc(out, func(a, b EventChange) int { return cmp.Compare(a.Event.Rev, b.Event.Rev) })
	return out, nil
}

// Event records e, dropping the oldest event when the store already holds
// the most recent 1000; it is kept until the store's event TTL after the
// last event of its series. It gives e the next revision, and each removal
// it makes the one after. Similar events with different messages are
// combined, as the kubelet's recorder combines them (see correlate). It
// does not log: the caller does.
func (s *Store) Event(e pod.Event) {
	s.mu.Lock()
	now := time.Now()
	s.expireLocked(now)
	r := RecordedEvent{Event: e}
	if ns, name, ok := strings.Cut(e.Pod, "/"); ok {
		if p, ok := s.pods[pod.Key{Namespace: ns, Name: name}]; ok {
			r.UID = string(p.UID)
		}
	}
	k := s.events.correlate(&r, now)
	s.revs.rev++
	r.Rev = s.revs.rev
	if removal, ok := s.events.add(r, k, now.Add(s.events.ttl)); ok {
		s.revs.rev++
		s.events.remember(removal, s.revs.rev)
	}
	s.armExpiryLocked(now)
	s.eventLocked()
	s.mu.Unlock()
	s.notify()
}

// expireLocked removes the series that expired by now, giving each
// removal a revision, and wakes the subscribers when there were some. s.mu
// is held.
func (s *Store) expireLocked(now time.Time) {
	removals := s.events.expire(now)
	for _, m := range removals {
		s.revs.rev++
		s.events.remember(m, s.revs.rev)
	}
	if len(removals) > 0 {
		s.armExpiryLocked(now)
		s.eventLocked()
	}
}

// armExpiryLocked sets the store's one timer for the next expiry, when
// it is not set for it already. s.mu is held.
//
// The timer is what tells watchers of an expiry when nothing else changes;
// reads expire what is due themselves, so a late timer is never seen. Its
// function only takes the lock and returns, and a Store holds at most one
// timer, which it replaces rather than adds to.
func (s *Store) armExpiryLocked(now time.Time) {
	r := &s.events
	next, ok := r.nextExpiry()
	if r.timer != nil && ok && next.Equal(r.at) {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if !ok {
		return
	}
	r.gen++
	gen := r.gen
	r.at = next
	r.timer = time.AfterFunc(next.Sub(now), func() { s.expiryDue(gen) })
}

// expiryDue runs when the timer of generation gen fires.
func (s *Store) expiryDue(gen uint64) {
	s.mu.Lock()
	if gen == s.events.gen {
		s.events.timer = nil
	}
	now := time.Now()
	s.expireLocked(now)
	s.armExpiryLocked(now)
	s.mu.Unlock()
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
	s.expireLocked(time.Now())
	out := make([]RecordedEvent, 0, len(s.events.held))
	for _, h := range s.events.held {
		if matchPod(h.Pod, podFilter) {
			out = append(out, s.resolveLocked(h.RecordedEvent))
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

// EventsSince returns the changes of the events after revision rev,
// oldest first, or ErrRevisionGone when the store no longer knows them
// all.
func (s *Store) EventsSince(rev uint64) ([]EventChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(time.Now())
	out, err := s.events.since(rev, s.revs.rev)
	for i := range out {
		out[i].Event = s.resolveLocked(out[i].Event)
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
