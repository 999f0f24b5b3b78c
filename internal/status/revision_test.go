package status

import (
	"errors"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

func revPod(name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Status: v1.PodStatus{Phase: phase}}
}

// TestRevisions: every change of a pod gets the next revision, a pod set
// again unchanged gets none, and the history gives the changes after a
// revision with their types.
func TestRevisions(t *testing.T) {
	s := NewStore()
	start := s.Revision()
	if start < uint64(time.Now().Add(-time.Minute).UnixMicro()) {
		t.Fatalf("first revision %d does not come from the clock", start)
	}
	s.SetPod(revPod("a", v1.PodPending))
	s.SetPod(revPod("a", v1.PodPending)) // unchanged
	s.SetPod(revPod("a", v1.PodRunning))
	s.SetPod(revPod("b", v1.PodRunning))
	s.DeletePod(pod.Key{Namespace: "default", Name: "a"})
	s.DeletePod(pod.Key{Namespace: "default", Name: "a"}) // gone already

	if got := s.Revision(); got != start+4 {
		t.Fatalf("revision after 4 changes = %d, want %d", got, start+4)
	}
	changes, err := s.PodChangesSince(start)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED a Pending", "MODIFIED a Running", "ADDED b Running", "DELETED a Running"}
	if len(changes) != len(want) {
		t.Fatalf("changes = %+v, want %v", changes, want)
	}
	for i, c := range changes {
		got := string(c.Type) + " " + c.Object.Name + " " + string(c.Object.Status.Phase)
		if got != want[i] || c.Rev != start+uint64(i)+1 || c.Object.ResourceVersion != strconv.FormatUint(c.Rev, 10) {
			t.Errorf("change %d = %s rev %d rv %s, want %s rev %d", i, got, c.Rev, c.Object.ResourceVersion, want[i], start+uint64(i)+1)
		}
	}
	pods, rev := s.PodsAt()
	if len(pods) != 1 || pods[0].Name != "b" || rev != start+4 || pods[0].ResourceVersion != strconv.FormatUint(start+3, 10) {
		t.Errorf("PodsAt = %+v at %d", pods, rev)
	}
	if later, err := s.PodChangesSince(start + 2); err != nil || len(later) != 2 {
		t.Errorf("changes after the second = %+v, %v; want 2", later, err)
	}
	for _, bad := range []uint64{start - 1, start + 5, 1} {
		if _, err := s.PodChangesSince(bad); !errors.Is(err, ErrRevisionGone) {
			t.Errorf("changes since %d: %v, want ErrRevisionGone", bad, err)
		}
	}
}

// TestRevisionsForget: once more changes than the history holds were
// made, the oldest revisions are gone and the recent ones are not.
func TestRevisionsForget(t *testing.T) {
	s := NewStore()
	start := s.Revision()
	for i := range maxHistory + 10 {
		s.SetPod(revPod("a", v1.PodPhase(strconv.Itoa(i))))
	}
	if _, err := s.PodChangesSince(start); !errors.Is(err, ErrRevisionGone) {
		t.Errorf("changes since the start: %v, want ErrRevisionGone", err)
	}
	changes, err := s.PodChangesSince(start + 10)
	if err != nil || len(changes) != maxHistory {
		t.Errorf("changes since the start+10: %d, %v; want %d", len(changes), err, maxHistory)
	}
}

// TestNodeRevision: the node's resourceVersion moves when it changes, not
// when a condition is set again as it was.
func TestNodeRevision(t *testing.T) {
	s := NewStore()
	s.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	first := s.Node().ResourceVersion
	c := v1.NodeCondition{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"}
	s.SetNodeCondition(c)
	second := s.Node().ResourceVersion
	s.SetNodeCondition(c)
	if s.Node().ResourceVersion != second || second == first {
		t.Errorf("resourceVersions %s, %s, then %s for the same condition", first, second, s.Node().ResourceVersion)
	}
	s.SetReady()
	if s.Node().ResourceVersion == second {
		t.Error("the node's resourceVersion stayed when it became ready")
	}
}

// TestCreationTimestamp: a pod reported without a creationTimestamp gets
// its start time, or the time of its first report, and keeps it.
func TestCreationTimestamp(t *testing.T) {
	s := NewStore()
	started := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	adopted := revPod("adopted", v1.PodRunning)
	adopted.Status.StartTime = &started
	s.SetPod(adopted)
	s.SetPod(revPod("new", v1.PodPending))
	p, _ := s.Pod("default/adopted")
	if !p.CreationTimestamp.Equal(&started) {
		t.Errorf("adopted pod created %v, want its start %v", p.CreationTimestamp, started)
	}
	p, _ = s.Pod("default/new")
	first := p.CreationTimestamp
	if first.IsZero() || time.Since(first.Time) > time.Minute {
		t.Errorf("new pod created %v, want about now", first)
	}
	later := revPod("new", v1.PodRunning)
	later.Status.StartTime = &started
	s.SetPod(later)
	if p, _ = s.Pod("default/new"); !p.CreationTimestamp.Equal(&first) {
		t.Errorf("pod created %v after an update, want %v kept", p.CreationTimestamp, first)
	}
}
