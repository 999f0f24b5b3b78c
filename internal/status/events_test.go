package status

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestEventRevisions: events take revisions from the counter of the pods'
// changes, repeats count in a series, and EventsSince resumes after a
// revision until the ring has dropped what came after it.
func TestEventRevisions(t *testing.T) {
	s := NewStore()
	p := testPod("ns", "web", "Running", true)
	p.UID = "uid-1"
	s.SetPod(p)
	podRev := s.Revision()
	base := time.Date(2026, 11, 21, 3, 15, 0, 0, time.UTC)
	backoff := pod.Event{Pod: "ns/web", Container: "c", Type: "Warning", Reason: "BackOff", Message: "Back-off restarting failed container"}
	for i := range 3 {
		e := backoff
		e.Time = base.Add(time.Duration(i) * time.Minute)
		s.Event(e)
	}
	s.Event(pod.Event{Time: base.Add(5 * time.Minute), Object: "node/n1", Type: "Normal", Reason: "NodeReady"})

	events, rev := s.EventsAt()
	if len(events) != 4 || rev != podRev+4 {
		t.Fatalf("EventsAt() = %d events at %d, want 4 at %d", len(events), rev, podRev+4)
	}
	for i, e := range events {
		if e.Rev != podRev+uint64(i)+1 {
			t.Errorf("event %d has revision %d, want %d", i, e.Rev, podRev+uint64(i)+1)
		}
	}
	last := events[2]
	if last.Count != 3 || !last.First.Equal(base) || !last.Time.Equal(base.Add(2*time.Minute)) || last.UID != "uid-1" {
		t.Errorf("third BackOff = count %d, first %v, time %v, uid %q; want 3, %v, %v, uid-1",
			last.Count, last.First, last.Time, last.UID, base, base.Add(2*time.Minute))
	}
	if events[3].Count != 1 || events[3].UID != "" {
		t.Errorf("node event = count %d, uid %q; want 1 and no uid", events[3].Count, events[3].UID)
	}

	since, err := s.EventsSince(podRev + 2)
	if err != nil || len(since) != 2 || since[0].Event.Rev != podRev+3 {
		t.Errorf("EventsSince(%d) = %+v, %v; want the last two", podRev+2, since, err)
	}
	if since, err := s.EventsSince(rev); err != nil || len(since) != 0 {
		t.Errorf("EventsSince(current) = %+v, %v; want none", since, err)
	}
	if _, err := s.EventsSince(rev + 1); !errors.Is(err, ErrRevisionGone) {
		t.Errorf("EventsSince(future) error = %v, want ErrRevisionGone", err)
	}

	// Fill the ring: the BackOffs are dropped, so their series is
	// forgotten and a repeat starts a new one; a watch resumed from
	// before their drop hears of their removal, at a revision of its own.
	for i := range maxEvents {
		s.Event(pod.Event{Time: base.Add(time.Hour), Pod: "ns/other", Reason: fmt.Sprint(i)})
	}
	e := backoff
	e.Time = base.Add(2 * time.Hour)
	s.Event(e)
	events, _ = s.EventsAt()
	if got := events[len(events)-1]; got.Count != 1 || !got.First.Equal(e.Time) {
		t.Errorf("BackOff after its series was dropped: count %d, first %v; want 1, %v", got.Count, got.First, e.Time)
	}
	changes, err := s.EventsSince(podRev + 2)
	if err != nil {
		t.Fatalf("EventsSince(before the drop) error = %v", err)
	}
	var deleted []string
	for _, c := range changes {
		if c.Type == WatchDeleted {
			deleted = append(deleted, fmt.Sprintf("%s@%d", c.Event.Reason, c.Event.Rev))
		}
	}
	// The third BackOff goes with the 999th other event, the node event
	// with the 1000th, each removal taking the revision after it; a
	// watcher from podRev+2 never heard of the node event.
	if want := fmt.Sprintf("BackOff@%d", podRev+4+999+1); len(deleted) != 1 || deleted[0] != want {
		t.Errorf("removals after %d = %v, want [%s]", podRev+2, deleted, want)
	}
	// After the oldest event kept: the 999 newer ones, and the removals
	// of the BackOffs, the node event and the first other event.
	if got, err := s.EventsSince(events[0].Rev); err != nil || len(got) != maxEvents-1+3 {
		t.Errorf("EventsSince(oldest kept) = %d changes, %v; want %d", len(got), err, maxEvents-1+3)
	}
	if len(s.events.series) > maxEvents {
		t.Errorf("%d series kept for %d events", len(s.events.series), maxEvents)
	}
}
