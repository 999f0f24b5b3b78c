package status

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// eventStep is a turn of an event table: wait, then record an event
// (none when its Reason is empty).
type eventStep struct {
	wait  time.Duration
	event pod.Event
}

// ev is an event of pod ns/web with a reason and a message.
func ev(wait time.Duration, reason, message string) eventStep {
	return eventStep{wait: wait, event: pod.Event{Pod: "ns/web", Type: "Warning", Reason: reason, Message: message}}
}

// differing are n events of one reason and n different messages, a
// second apart.
func differing(n int, reason string) []eventStep {
	var out []eventStep
	for i := range n {
		out = append(out, ev(time.Second, reason, fmt.Sprintf("m%d", i)))
	}
	return out
}

// TestEventRetention runs turns of events in fake time and checks the
// events the store holds after them, as an apiserver would hold the
// kubelet's (one per series: reason, message and count), and the series
// removed on the way: expired an hour (the TTL) after their latest event,
// or pushed out by the cap; and similar events combined as the kubelet's
// recorder combines them.
func TestEventRetention(t *testing.T) {
	tests := []struct {
		name    string
		ttl     time.Duration // 0: the default
		steps   [][]eventStep
		want    []string
		removed []string
	}{{
		name:  "a repeat within the hour counts in its series",
		steps: [][]eventStep{{ev(0, "BackOff", "x"), ev(50*time.Minute, "BackOff", "x"), ev(59*time.Minute, "", "")}},
		want:  []string{`BackOff "x" x2`},
	}, {
		name:    "a series expires an hour after its latest event",
		steps:   [][]eventStep{{ev(0, "BackOff", "x"), ev(50*time.Minute, "BackOff", "x"), ev(time.Hour, "", "")}},
		removed: []string{`BackOff "x" x2`},
	}, {
		name:    "one series expiring leaves the others",
		steps:   [][]eventStep{{ev(0, "Pulled", "a"), ev(30*time.Minute, "Started", "b"), ev(30*time.Minute, "", "")}},
		want:    []string{`Started "b" x1`},
		removed: []string{`Pulled "a" x1`},
	}, {
		name:    "a repeat after its series expired starts a new one",
		steps:   [][]eventStep{{ev(0, "BackOff", "x"), ev(0, "BackOff", "x"), ev(2*time.Hour, "BackOff", "x")}},
		want:    []string{`BackOff "x" x1`},
		removed: []string{`BackOff "x" x2`},
	}, {
		name:    "a shorter TTL",
		ttl:     time.Minute,
		steps:   [][]eventStep{{ev(0, "Pulled", "a"), ev(59*time.Second, "Started", "b"), ev(time.Second, "", "")}},
		want:    []string{`Started "b" x1`},
		removed: []string{`Pulled "a" x1`},
	}, {
		name:  "nine different messages stay apart",
		steps: [][]eventStep{differing(9, "Unhealthy")},
		want: []string{`Unhealthy "m0" x1`, `Unhealthy "m1" x1`, `Unhealthy "m2" x1`, `Unhealthy "m3" x1`,
			`Unhealthy "m4" x1`, `Unhealthy "m5" x1`, `Unhealthy "m6" x1`, `Unhealthy "m7" x1`, `Unhealthy "m8" x1`},
	}, {
		name:  "the tenth different message and those after it are combined",
		steps: [][]eventStep{differing(12, "Unhealthy")},
		want: []string{`Unhealthy "(combined from similar events): m11" x3`, `Unhealthy "m0" x1`, `Unhealthy "m1" x1`,
			`Unhealthy "m2" x1`, `Unhealthy "m3" x1`, `Unhealthy "m4" x1`, `Unhealthy "m5" x1`, `Unhealthy "m6" x1`,
			`Unhealthy "m7" x1`, `Unhealthy "m8" x1`},
	}, {
		name:  "a repeat of one of the first nine counts in its own series",
		steps: [][]eventStep{differing(10, "Unhealthy"), {ev(time.Second, "Unhealthy", "m3")}},
		want: []string{`Unhealthy "(combined from similar events): m9" x1`, `Unhealthy "m0" x1`, `Unhealthy "m1" x1`,
			`Unhealthy "m2" x1`, `Unhealthy "m3" x2`, `Unhealthy "m4" x1`, `Unhealthy "m5" x1`, `Unhealthy "m6" x1`,
			`Unhealthy "m7" x1`, `Unhealthy "m8" x1`},
	}, {
		name: "similar events over ten minutes apart start again",
		steps: [][]eventStep{differing(9, "Unhealthy"),
			{ev(10*time.Minute+time.Second, "Unhealthy", "m9"), ev(time.Second, "Unhealthy", "m10")}},
		want: []string{`Unhealthy "m0" x1`, `Unhealthy "m1" x1`, `Unhealthy "m10" x1`, `Unhealthy "m2" x1`,
			`Unhealthy "m3" x1`, `Unhealthy "m4" x1`, `Unhealthy "m5" x1`, `Unhealthy "m6" x1`, `Unhealthy "m7" x1`,
			`Unhealthy "m8" x1`, `Unhealthy "m9" x1`},
	}, {
		name:  "events with different reasons are not similar",
		steps: [][]eventStep{differing(5, "Unhealthy"), differing(5, "Failed")},
		want: []string{`Failed "m0" x1`, `Failed "m1" x1`, `Failed "m2" x1`, `Failed "m3" x1`, `Failed "m4" x1`,
			`Unhealthy "m0" x1`, `Unhealthy "m1" x1`, `Unhealthy "m2" x1`, `Unhealthy "m3" x1`, `Unhealthy "m4" x1`},
	}, {
		name:    "a combined event expires like another",
		steps:   [][]eventStep{differing(9, "Unhealthy"), {ev(5*time.Minute, "Unhealthy", "m9"), ev(58*time.Minute, "", "")}},
		want:    []string{`Unhealthy "(combined from similar events): m9" x1`},
		removed: []string{`Unhealthy "m0" x1`, `Unhealthy "m1" x1`, `Unhealthy "m2" x1`, `Unhealthy "m3" x1`, `Unhealthy "m4" x1`, `Unhealthy "m5" x1`, `Unhealthy "m6" x1`, `Unhealthy "m7" x1`, `Unhealthy "m8" x1`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []StoreOption
				if tt.ttl != 0 {
					opts = append(opts, WithEventTTL(tt.ttl))
				}
				s := NewStore(opts...)
				for _, turn := range tt.steps {
					for _, st := range turn {
						time.Sleep(st.wait)
						if st.event.Reason != "" {
							st.event.Time = time.Now()
							s.Event(st.event)
						}
					}
				}
				recorded, _ := s.EventsAt()
				if got := seriesOf(recorded); !slices.Equal(got, tt.want) {
					t.Errorf("events held = %q\nwant %q", got, tt.want)
				}
				var removed []RecordedEvent
				s.mu.Lock()
				for _, m := range s.events.removals {
					removed = append(removed, m.last)
				}
				s.mu.Unlock()
				if got := seriesOf(removed); !slices.Equal(got, tt.removed) {
					t.Errorf("series removed = %q\nwant %q", got, tt.removed)
				}
			})
		})
	}
}

// seriesOf is each series of records, in its latest state, as
// `REASON "MESSAGE" xCOUNT`, sorted.
func seriesOf(records []RecordedEvent) []string {
	var out []string
	for _, e := range CoreEvents(records, "n1") {
		out = append(out, fmt.Sprintf("%s %q x%d", e.Reason, e.Message, e.Count))
	}
	slices.Sort(out)
	return out
}

// TestEventExpiryWakes: a subscriber hears of an expiry when it is due,
// with nothing else recorded, and the store keeps no timer once it holds
// no event.
func TestEventExpiryWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStore(WithEventTTL(time.Minute))
		s.Event(pod.Event{Pod: "ns/web", Reason: "Pulled"})
		sub := s.Subscribe()
		defer sub.Close()
		<-sub.Changed()
		sub.Events()
		rev := s.Revision()

		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		select {
		case <-sub.Changed():
			t.Fatal("a signal before the event expired")
		default:
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case <-sub.Changed():
		default:
			t.Fatal("no signal when the event expired")
		}
		changes, err := s.EventsSince(rev)
		if err != nil || len(changes) != 1 || changes[0].Type != WatchDeleted || changes[0].Event.Rev != rev+1 {
			t.Errorf("EventsSince(%d) = %+v, %v; want the removal at %d", rev, changes, err, rev+1)
		}
		if events, lost := sub.Events(); len(events) != 0 || lost != 0 {
			t.Errorf("Events() after the expiry = %+v, %d lost; want none", events, lost)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.events.timer != nil || len(s.events.held) != 0 || len(s.events.series) != 0 {
			t.Errorf("after the last expiry: timer %v, %d events, %d series; want none", s.events.timer, len(s.events.held), len(s.events.series))
		}
	})
}

// TestEventRemovalsBounded: the store keeps the latest 1000 removals; a
// watch from before those is too old.
func TestEventRemovalsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStore(WithEventTTL(time.Second))
		start := s.Revision()
		for i := range maxEvents + 1 {
			s.Event(pod.Event{Pod: "ns/web", Reason: fmt.Sprint(i)})
			time.Sleep(time.Second)
		}
		if _, err := s.EventsSince(start); err == nil {
			t.Errorf("EventsSince(before %d removals) error = nil, want ErrRevisionGone", maxEvents+1)
		}
		s.mu.Lock()
		n := len(s.events.removals)
		s.mu.Unlock()
		if n != maxEvents {
			t.Errorf("%d removals kept, want %d", n, maxEvents)
		}
	})
}
