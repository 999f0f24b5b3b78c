package desired

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// pods returns pods in namespace default with the names given.
func pods(names ...string) []*pod.Pod {
	var out []*pod.Pod
	for _, n := range names {
		out = append(out, newPod("default/"+n, "/m/"+n+".yaml"))
	}
	return out
}

// names lists the pods' names, comma-separated, in their order.
func names(ps []*pod.Pod) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Name
	}
	return strings.Join(s, ",")
}

func TestAdmitPods(t *testing.T) {
	tests := []struct {
		name                   string
		prev                   []string
		desired                []string
		max                    int
		wantAdmit, wantRefused string
	}{
		{"no limit", nil, []string{"c", "b", "a"}, 0, "c,b,a", ""},
		{"under the limit", nil, []string{"b", "a"}, 2, "b,a", ""},
		{"key order", nil, []string{"c", "b", "a"}, 2, "a,b", "c"},
		{"admitted before keep their place", []string{"c"}, []string{"c", "b", "a"}, 2, "c,a", "b"},
		{"a gone pod frees a place", []string{"a", "b"}, []string{"c", "b"}, 2, "c,b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := map[pod.Key]bool{}
			for _, n := range tt.prev {
				prev[pod.Key{Namespace: "default", Name: n}] = true
			}
			admitted, refused := admitPods(prev, pods(tt.desired...), tt.max)
			if names(admitted) != tt.wantAdmit || names(refused) != tt.wantRefused {
				t.Errorf("admitPods(%v, %v, %d) = %s / %s, want %s / %s", tt.prev, tt.desired, tt.max,
					names(admitted), names(refused), tt.wantAdmit, tt.wantRefused)
			}
		})
	}
}

// admitStep is one desired set given to admission and what should come of it.
type admitStep struct {
	desired      []string
	wantAdmitted string
	wantTold     string // the pods newly refused, one OutOfpods event each
}

// TestAdmissionTellsOnce: a refused pod is told once while it stays
// refused, and again only after it was admitted or gone in between; pods
// admitted keep their place across sets.
func TestAdmissionTellsOnce(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		steps []admitStep
	}{
		{"max 0: no cap", 0, []admitStep{
			{[]string{"c", "b", "a"}, "c,b,a", ""},
			{[]string{"d", "c", "b", "a"}, "d,c,b,a", ""},
		}},
		{"refused: told once while it lasts", 1, []admitStep{
			{[]string{"a", "b"}, "a", "b"},
			{[]string{"a", "b"}, "a", ""},
			{[]string{"a", "b", "c"}, "a", "c"},
			{[]string{"a", "b", "c"}, "a", ""},
		}},
		{"told again after being admitted", 1, []admitStep{
			{[]string{"a", "b"}, "a", "b"},
			{[]string{"b"}, "b", ""},
			{[]string{"a", "b"}, "b", "a"},
			{[]string{"a"}, "a", ""},
			{[]string{"a", "b"}, "a", "b"},
		}},
		{"told again after being gone", 1, []admitStep{
			{[]string{"a", "b"}, "a", "b"},
			{[]string{"a"}, "a", ""},
			{[]string{"a", "b"}, "a", "b"},
		}},
		{"a new pod never pushes out an admitted one", 2, []admitStep{
			{[]string{"b", "c"}, "b,c", ""},
			{[]string{"a", "b", "c"}, "b,c", "a"},
			{[]string{"a", "c"}, "a,c", ""}, // under the cap: as given
		}},
	}
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := admitState{max: tt.max}
			for i, st := range tt.steps {
				admitted, events := s.admit(pods(st.desired...), now)
				var told []string
				for _, e := range events {
					told = append(told, strings.TrimPrefix(e.Pod, "default/"))
					checkOutOfPods(t, e, tt.max, now)
				}
				if names(admitted) != st.wantAdmitted || strings.Join(told, ",") != st.wantTold {
					t.Errorf("step %d: admit(%v) = %s, told %q; want %s, told %q",
						i, st.desired, names(admitted), told, st.wantAdmitted, st.wantTold)
				}
			}
		})
	}
}

// checkOutOfPods checks that e is an OutOfpods event, stamped now.
func checkOutOfPods(t *testing.T, e pod.Event, max int, now time.Time) {
	t.Helper()
	want := pod.Event{Time: now, Pod: e.Pod, Type: pod.EventWarning, Reason: "OutOfpods",
		Message: fmt.Sprintf("pod %s is not run: the node already runs maxPods (%d) pods", e.Pod, max)}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("event = %+v, want %+v", e, want)
	}
}

// eventRecorder is an EventSink keeping what it is told.
type eventRecorder chan pod.Event

func (r eventRecorder) Event(e pod.Event) { r <- e }

// TestAdmissionRun drives Run through its channels with a fixed clock:
// each set goes out capped, its events told before it goes.
func TestAdmissionRun(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	in, out, events := make(chan []*pod.Pod), make(chan []*pod.Pod), make(eventRecorder, 10)
	a := NewAdmission(AdmissionConfig{Max: 2, Events: events, Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, in, out) }()

	for i, st := range []admitStep{
		{[]string{"c", "b", "a"}, "a,b", "c"},
		{[]string{"c", "b", "a"}, "a,b", ""},
		{[]string{"d", "c"}, "d,c", ""},
	} {
		in <- pods(st.desired...)
		if got := names(receive(t, out, "admitted set")); got != st.wantAdmitted {
			t.Errorf("step %d: admitted %s, want %s", i, got, st.wantAdmitted)
		}
		// Run tells the events before it sends the set.
		var told []string
		for len(events) > 0 {
			e := <-events
			checkOutOfPods(t, e, 2, now)
			told = append(told, strings.TrimPrefix(e.Pod, "default/"))
		}
		if strings.Join(told, ",") != st.wantTold {
			t.Errorf("step %d: told %q, want %q", i, told, st.wantTold)
		}
	}

	// Cancelled while it waits to send, Run returns.
	in <- pods("e")
	cancel()
	if err := receive(t, done, "return from Run once cancelled"); err != nil {
		t.Errorf("Run = %v, want nil once ctx is done", err)
	}
}
