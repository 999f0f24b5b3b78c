package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// testPod returns a pod in the given phase, with condition Ready as given.
func testPod(ns, name string, phase v1.PodPhase, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{
			Phase:      phase,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}},
		},
	}
}

func TestSummary(t *testing.T) {
	type podSpec struct {
		phase v1.PodPhase
		ready bool
	}
	running := podSpec{v1.PodRunning, true}
	tests := []struct {
		name     string
		pods     []podSpec
		errors   int
		imports  int // failed image files
		notReady bool
		activity string
		want     string
	}{
		{name: "none", want: "0 pods"},
		{name: "none starting", notReady: true, want: "starting: 0 pods"},
		{name: "one", pods: []podSpec{running}, want: "1 pod: 1 running, 1 ready"},
		{name: "five", pods: []podSpec{running, running, running, running, {v1.PodRunning, false}},
			errors: 1, want: "5 pods: 5 running, 4 ready; 1 manifest error"},
		{name: "mixed phases", pods: []podSpec{running, {v1.PodPending, false}, {"", false},
			{v1.PodSucceeded, false}, {v1.PodFailed, false}, {v1.PodUnknown, false}},
			want: "6 pods: 1 running, 2 pending, 1 succeeded, 1 failed, 1 unknown, 1 ready"},
		{name: "none running", pods: []podSpec{{v1.PodFailed, false}},
			want: "1 pod: 0 running, 1 failed, 0 ready"},
		{name: "only manifest errors", errors: 2, want: "0 pods; 2 manifest errors"},
		{name: "starting with pods", notReady: true, pods: []podSpec{{v1.PodPending, false}},
			want: "starting: 1 pod: 0 running, 1 pending, 0 ready"},
		{name: "import errors", pods: []podSpec{running}, errors: 1, imports: 2,
			want: "1 pod: 1 running, 1 ready; 1 manifest error; 2 image import errors"},
		{name: "one import error", imports: 1, want: "0 pods; 1 image import error"},
		{name: "shutting down", activity: "shutting down: stopping 1 pod", pods: []podSpec{{v1.PodFailed, false}},
			want: "shutting down: stopping 1 pod; 1 pod: 0 running, 1 failed, 0 ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			for i, p := range tt.pods {
				s.SetPod(testPod("ns", fmt.Sprintf("p%d", i), p.phase, p.ready))
			}
			var ms []Manifest
			for i := range tt.errors {
				ms = append(ms, Manifest{Path: fmt.Sprintf("bad%d.yaml", i), Error: "invalid"})
			}
			ms = append(ms, Manifest{Path: "good.yaml", Pods: []string{"ns/p0"}})
			s.SetManifests(ms)
			files := []ImportFile{{Path: "good.tar", Images: []string{"docker.io/library/good:1"}}}
			for i := range tt.imports {
				files = append(files, ImportFile{Path: fmt.Sprintf("bad%d.tar", i), Error: "not an image archive"})
			}
			s.SetImports(files)
			if !tt.notReady {
				s.SetReady()
			}
			s.SetActivity(tt.activity)
			if got := s.Summary(); got != tt.want {
				t.Errorf("Summary() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStorePodLookup(t *testing.T) {
	s := NewStore()
	s.SetPod(testPod("kube-system", "etcd", v1.PodRunning, true))
	s.SetPod(testPod("kube-system", "web", v1.PodRunning, true))
	s.SetPod(testPod("default", "web", v1.PodRunning, true))
	s.SetPod(testPod("a", "dup", v1.PodRunning, true))
	s.SetPod(testPod("b", "dup", v1.PodRunning, true))
	// Static pods, named metadata.name + "-" + the node in lower case.
	for _, key := range []string{"kube-system/apiserver-node1", "default/web-node1", "a/db-node1", "b/db-node1"} {
		ns, name, _ := strings.Cut(key, "/")
		p := testPod(ns, name, v1.PodRunning, true)
		p.Spec.NodeName = "Node1"
		s.SetPod(p)
	}

	tests := []struct {
		name string
		want string // namespace/name; empty: not found
	}{
		{"etcd", "kube-system/etcd"},
		{"kube-system/etcd", "kube-system/etcd"},
		{"default/etcd", ""},
		{"web", "default/web"},
		{"kube-system/web", "kube-system/web"},
		{"dup", ""}, // ambiguous
		{"a/dup", "a/dup"},
		{"missing", ""},
		// A manifest's metadata.name, when no pod has it as its full name.
		{"apiserver-node1", "kube-system/apiserver-node1"},
		{"apiserver", "kube-system/apiserver-node1"},
		{"kube-system/apiserver", "kube-system/apiserver-node1"},
		{"default/apiserver", ""},
		{"web-node1", "default/web-node1"},
		{"db", ""}, // ambiguous
		{"b/db", "b/db-node1"},
		{"node1", ""},
	}
	for _, tt := range tests {
		p, ok := s.Pod(tt.name)
		got := ""
		if ok {
			got = p.Namespace + "/" + p.Name
		}
		if got != tt.want {
			t.Errorf("Pod(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if _, matches := s.find("db"); len(matches) != 2 {
		t.Errorf("find(db) candidates = %v, want 2", matches)
	}
	if _, matches := s.find("dup"); len(matches) != 2 {
		t.Errorf("find(dup) candidates = %v, want 2", matches)
	}

	got := s.Pods()
	var keys []string
	for _, p := range got {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	want := "[a/db-node1 a/dup b/db-node1 b/dup default/web default/web-node1 kube-system/apiserver-node1 kube-system/etcd kube-system/web]"
	if fmt.Sprint(keys) != want {
		t.Errorf("Pods() = %v, want %v", keys, want)
	}
	if got[0].Kind != "Pod" || got[0].APIVersion != "v1" {
		t.Errorf("Pods()[0] type = %s/%s, want v1/Pod", got[0].APIVersion, got[0].Kind)
	}

	s.DeletePod(pod.Key{Namespace: "a", Name: "dup"})
	if p, ok := s.Pod("dup"); !ok || p.Namespace != "b" {
		t.Errorf("after delete, Pod(dup) = %v, %v; want b/dup", p, ok)
	}
}

func TestStoreCopies(t *testing.T) {
	s := NewStore()
	p := testPod("ns", "p", v1.PodRunning, true)
	s.SetPod(p)
	p.Status.Phase = v1.PodFailed // must not reach the store
	got, _ := s.Pod("ns/p")
	if got.Status.Phase != v1.PodRunning {
		t.Fatalf("store kept a reference to the caller's pod")
	}
	got.Status.Phase = v1.PodFailed // must not reach the store either
	if again, _ := s.Pod("ns/p"); again.Status.Phase != v1.PodRunning {
		t.Fatalf("store returned a reference to its pod")
	}

	ms := []Manifest{{Path: "a.yaml", Pods: []string{"ns/p"}}}
	s.SetManifests(ms)
	ms[0].Pods[0] = "changed"
	if got := s.Manifests(); got[0].Pods[0] != "ns/p" {
		t.Fatalf("Manifests() = %v: store kept the caller's slice", got)
	}
	if got := NewStore().Manifests(); got == nil {
		t.Errorf("Manifests() of an empty store = nil, want empty")
	}
}

func TestStoreEvents(t *testing.T) {
	s := NewStore()
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxEvents + 5 {
		name := "ns/a"
		if i%2 == 1 {
			name = "other/b"
		}
		s.Event(pod.Event{Time: base.Add(time.Duration(i) * time.Second), Pod: name, Reason: fmt.Sprint(i)})
	}
	all := s.Events("")
	if len(all) != maxEvents {
		t.Fatalf("len(Events()) = %d, want %d", len(all), maxEvents)
	}
	if all[0].Reason != "5" || all[len(all)-1].Reason != fmt.Sprint(maxEvents+4) {
		t.Errorf("Events() spans %s..%s, want 5..%d oldest first", all[0].Reason, all[len(all)-1].Reason, maxEvents+4)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) {
			t.Fatalf("Events() not in order at %d", i)
		}
	}
	for _, filter := range []string{"ns/a", "a"} {
		got := s.Events(filter)
		if len(got) != maxEvents/2 {
			t.Errorf("len(Events(%q)) = %d, want %d", filter, len(got), maxEvents/2)
		}
		for _, e := range got {
			if e.Pod != "ns/a" {
				t.Fatalf("Events(%q) includes an event of %s", filter, e.Pod)
			}
		}
	}
	if got := s.Events("other/a"); len(got) != 0 {
		t.Errorf("Events(other/a) = %d events, want none", len(got))
	}
}

func TestStoreChanged(t *testing.T) {
	s := NewStore()
	select {
	case <-s.Changed():
		t.Fatal("Changed signalled before any change")
	default:
	}
	// Many changes coalesce into one pending signal.
	s.SetPod(testPod("ns", "p", v1.PodRunning, true))
	s.SetReady()
	s.Event(pod.Event{Pod: "ns/p"})
	select {
	case <-s.Changed():
	default:
		t.Fatal("Changed not signalled after a change")
	}
	select {
	case <-s.Changed():
		t.Fatal("Changed signalled twice for one burst")
	default:
	}
	s.SetReady() // already ready: no change
	s.DeletePod(pod.Key{Namespace: "ns", Name: "missing"})
	select {
	case <-s.Changed():
		t.Fatal("Changed signalled without a change")
	default:
	}
}
