package storagelimit

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// fakeMeter reports usage and records the evictions asked of it.
type fakeMeter struct {
	usage    []pod.StorageUsage
	evictErr error
	evicted  []string // "id: message"
	asked    int      // calls of StorageUsage
}

func (m *fakeMeter) StorageUsage(_ context.Context, uids map[string]bool) ([]pod.StorageUsage, error) {
	m.asked++
	var out []pod.StorageUsage
	for _, u := range m.usage {
		if uids[u.UID] {
			out = append(out, u)
		}
	}
	return out, nil
}

func (m *fakeMeter) Evict(_ context.Context, id, message string) error {
	if m.evictErr != nil {
		return m.evictErr
	}
	m.evicted = append(m.evicted, id+": "+message)
	return nil
}

type podList []v1.Pod

func (l podList) Pods() []v1.Pod { return l }

type eventLog []pod.Event

func (l *eventLog) Event(e pod.Event) { *l = append(*l, e) }

func reasons(evs eventLog) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Container+" "+e.Type+" "+e.Reason)
	}
	return out
}

// TestGuardActsOnce: a container over its limit is killed once however
// many checks see it before its exit; a failed kill is tried again; a new
// container (a restart) is a new one; a critical pod is warned of once.
func TestGuardActsOnce(t *testing.T) {
	over := usage(nil, use("a", 5*mi, 0))
	m := &fakeMeter{usage: []pod.StorageUsage{over}}
	var evs eventLog
	pods := podList{testPod(v1.PodSpec{Containers: []v1.Container{limited("a", "4Mi")}})}
	g := New(Config{Meter: m, Pods: pods, Events: &evs, Now: func() time.Time { return time.Unix(0, 0) }})
	ctx := context.Background()

	m.evictErr = errors.New("containerd is away")
	g.Check(ctx)
	if len(evs) != 0 {
		t.Fatalf("a failed kill told events %v", reasons(evs))
	}
	m.evictErr = nil
	g.Check(ctx)
	g.Check(ctx)
	msg := "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
	if want := []string{"id-a: " + msg}; !reflect.DeepEqual(m.evicted, want) {
		t.Errorf("evicted %q, want %q", m.evicted, want)
	}
	if want := []string{"a Warning Evicted"}; !reflect.DeepEqual(reasons(evs), want) {
		t.Errorf("events %v, want %v", reasons(evs), want)
	}

	// The restarted container, a new ID, over again.
	m.usage = []pod.StorageUsage{usage(nil, pod.ContainerStorage{Name: "a", ID: "id-a2", RootfsBytes: 5 * mi})}
	g.Check(ctx)
	if len(m.evicted) != 2 || len(evs) != 2 {
		t.Errorf("the restarted container over its limit: evicted %q, events %v; want it killed too", m.evicted, reasons(evs))
	}

	critical := int32(pod.SystemClusterCriticalPriority)
	pods[0].Spec.Priority = &critical
	m.usage = []pod.StorageUsage{usage(nil, pod.ContainerStorage{Name: "a", ID: "id-a3", RootfsBytes: 5 * mi})}
	g.Check(ctx)
	g.Check(ctx)
	if len(m.evicted) != 2 {
		t.Errorf("a critical pod's container was killed: %q", m.evicted)
	}
	if got := reasons(evs); len(got) != 3 || got[2] != "a Warning EvictionSkipped" {
		t.Errorf("events %v, want one EvictionSkipped for the critical pod", got)
	}

	// No pod with a limit: nothing is measured.
	pods[0].Spec.Containers[0].Resources.Limits = nil
	asked := m.asked
	g.Check(ctx)
	if m.asked != asked {
		t.Errorf("measured with no limit to enforce")
	}
}
