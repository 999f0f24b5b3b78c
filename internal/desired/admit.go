package desired

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// EventSink is told the events admission gives pods (the status store and
// the log).
type EventSink interface {
	Event(e pod.Event)
}

// AdmissionConfig configures an Admission.
type AdmissionConfig struct {
	// Max is the most pods admitted at once, the kubelet's maxPods; 0
	// (or less) admits every pod.
	Max int
	// Events is told each pod as it starts being refused; required when
	// Max is above 0.
	Events EventSink
	// Now stamps the events; nil means time.Now.
	Now func() time.Time
}

// Admission caps desired sets at a number of pods.
type Admission struct {
	cfg AdmissionConfig
}

// NewAdmission returns an Admission; it starts nothing.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Admission{cfg: cfg}
}

// Run reads desired sets from in until ctx is done and sends each to out
// capped at Max: the pods admitted before keep their place, so a new pod
// never pushes out a running one, and the rest are admitted in key order.
// Each pod refused gets a Warning event OutOfpods, as the kubelet's
// admission names it, when it starts being refused, and again only after
// it has been admitted (or gone) in between.
func (a *Admission) Run(ctx context.Context, in <-chan []*pod.Pod, out chan<- []*pod.Pod) error {
	state := admitState{max: a.cfg.Max}
	for {
		var desired []*pod.Pod
		select {
		case <-ctx.Done():
			return nil
		case desired = <-in:
		}
		admitted, events := state.admit(desired, a.cfg.Now())
		for _, e := range events {
			a.cfg.Events.Event(e)
		}
		select {
		case <-ctx.Done():
			return nil
		case out <- admitted:
		}
	}
}

// admitState is what an Admission remembers between desired sets.
type admitState struct {
	max      int
	admitted map[pod.Key]bool // in the last set sent
	refused  map[pod.Key]bool // in the last set, and told
}

// admit caps desired and returns the pods admitted and the events for the
// pods newly refused, stamped now.
func (s *admitState) admit(desired []*pod.Pod, now time.Time) (admitted []*pod.Pod, events []pod.Event) {
	admitted, refused := admitPods(s.admitted, desired, s.max)
	s.admitted = make(map[pod.Key]bool, len(admitted))
	for _, p := range admitted {
		s.admitted[p.Key()] = true
	}
	refusedNow := make(map[pod.Key]bool, len(refused))
	for _, p := range refused {
		k := p.Key()
		refusedNow[k] = true
		if !s.refused[k] {
			events = append(events, pod.Event{Time: now, Pod: k.String(), Type: pod.EventWarning, Reason: "OutOfpods",
				Message: fmt.Sprintf("pod %s is not run: the node already runs maxPods (%d) pods", k, s.max)})
		}
	}
	s.refused = refusedNow
	return admitted, events
}

// admitPods caps desired at max pods (0: no cap). Pods admitted before
// (prev) keep their place; the rest are admitted in key order.
func admitPods(prev map[pod.Key]bool, desired []*pod.Pod, max int) (admitted, refused []*pod.Pod) {
	if max <= 0 || len(desired) <= max {
		return desired, nil
	}
	sorted := slices.Clone(desired)
	slices.SortStableFunc(sorted, func(a, b *pod.Pod) int {
		ka, kb := a.Key(), b.Key()
		if pa, pb := prev[ka], prev[kb]; pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return cmp.Compare(ka.String(), kb.String())
	})
	return sorted[:max], sorted[max:]
}
