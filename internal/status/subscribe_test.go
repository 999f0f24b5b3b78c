package status

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestSubscriptionInitialState: a new subscription first gets every pod
// and every event the store holds, then only what changes.
func TestSubscriptionInitialState(t *testing.T) {
	s := NewStore()
	s.SetPod(testPod("b", "p2", v1.PodRunning, true))
	s.SetPod(testPod("a", "p1", v1.PodPending, false))
	s.Event(pod.Event{Pod: "a/p1", Reason: "Started"})
	sub := s.Subscribe()
	defer sub.Close()

	select {
	case <-sub.Changed():
	default:
		t.Fatal("Changed() has no signal for the initial state")
	}
	changes := sub.PodChanges()
	if len(changes) != 2 || changes[0].Key.String() != "a/p1" || changes[1].Key.String() != "b/p2" || changes[0].Pod == nil {
		t.Fatalf("first PodChanges() = %+v, want a/p1 and b/p2 with their pods", changes)
	}
	if events, lost := sub.Events(); len(events) != 1 || lost != 0 || events[0].Reason != "Started" {
		t.Errorf("first Events() = %+v, %d; want the Started event, 0 lost", events, lost)
	}
	if c := sub.PodChanges(); len(c) != 0 {
		t.Errorf("PodChanges() without changes = %+v, want none", c)
	}

	s.DeletePod(pod.Key{Namespace: "a", Name: "p1"})
	s.SetManifests(nil) // not a pod change
	<-sub.Changed()
	changes = sub.PodChanges()
	if len(changes) != 1 || changes[0].Key.String() != "a/p1" || changes[0].Pod != nil {
		t.Errorf("PodChanges() after DeletePod = %+v, want a/p1 with no pod", changes)
	}
}

// TestSubscriptionStuckSubscriber: a subscriber that never reads blocks no
// writer; when it reads at last, it gets the latest state of every pod,
// and learns how many events it lost.
func TestSubscriptionStuckSubscriber(t *testing.T) {
	s := NewStore()
	stuck := s.Subscribe()
	defer stuck.Close()
	const writes = 5000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			p := testPod("ns", fmt.Sprintf("p%d", i%3), v1.PodRunning, false)
			p.Annotations = map[string]string{"n": fmt.Sprint(i)}
			s.SetPod(p)
			s.Event(pod.Event{Pod: "ns/p0", Reason: fmt.Sprint(i)})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writers blocked by a subscriber that does not read")
	}

	changes := stuck.PodChanges()
	if len(changes) != 3 {
		t.Fatalf("PodChanges() = %d changes, want 3 (one per pod)", len(changes))
	}
	for i, c := range changes {
		last := writes - 1 - (writes-1-i)%3 // the last write of pod p<i>
		want := fmt.Sprint(last)
		if got := c.Pod.Annotations["n"]; got != want {
			t.Errorf("PodChanges()[%d] (%s) has write %s, want the last, %s", i, c.Key, got, want)
		}
	}
	events, lost := stuck.Events()
	if lost != writes-maxEvents || len(events) != maxEvents {
		t.Fatalf("Events() = %d events, %d lost; want %d, %d lost", len(events), lost, maxEvents, writes-maxEvents)
	}
	if first, last := events[0].Reason, events[len(events)-1].Reason; first != fmt.Sprint(writes-maxEvents) || last != fmt.Sprint(writes-1) {
		t.Errorf("Events() from %s to %s, want the last %d in order", first, last, maxEvents)
	}
	if events, lost := stuck.Events(); len(events) != 0 || lost != 0 {
		t.Errorf("Events() again = %d events, %d lost; want none", len(events), lost)
	}
}

// TestSubscriptionClose: a closed subscription is forgotten by the store.
func TestSubscriptionClose(t *testing.T) {
	s := NewStore()
	sub := s.Subscribe()
	sub.Close()
	sub.Close()
	s.SetPod(testPod("a", "p", v1.PodRunning, true))
	if n := len(s.subs); n != 0 {
		t.Errorf("store has %d subscriptions after Close, want 0", n)
	}
}
