package status

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestCoreEvents: the store's records as core/v1 Events: repeats as one
// with their count, named as the kubelet names them, pointing at the pod
// (its UID, even when stored after the event, and the container's field
// path, an init container's too), or at the node.
func TestCoreEvents(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	s := NewStore()
	backoff := pod.Event{Pod: "kube-system/etcd-n1", Container: "etcd", Type: pod.EventWarning, Reason: "BackOff", Message: "Back-off"}
	backoff.Time = t0
	s.Event(backoff)
	s.Event(pod.Event{Time: t0.Add(time.Second), Object: "node/n1", Type: pod.EventNormal, Reason: "ImageGarbageCollected", Message: "Removed image x"})
	backoff.Time = t0.Add(2 * time.Second)
	s.Event(backoff)
	s.Event(pod.Event{Time: t0.Add(3 * time.Second), Pod: "kube-system/etcd-n1", Container: "setup", Type: pod.EventNormal, Reason: "Started"})
	s.SetPod(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-n1", UID: "uid-etcd"},
		Spec:       v1.PodSpec{InitContainers: []v1.Container{{Name: "setup"}}, Containers: []v1.Container{{Name: "etcd"}}},
	})
	records, _ := s.EventsAt()
	got := CoreEvents(records, "n1")

	type row struct{ ns, name, ref string }
	var rows []row
	for _, e := range got {
		r := e.InvolvedObject
		rows = append(rows, row{e.Namespace, e.Name, fmt.Sprintf("%s %s/%s %s %s x%d", r.Kind, r.Namespace, r.Name, r.UID, r.FieldPath, e.Count)})
	}
	want := []row{
		{"default", fmt.Sprintf("n1.%x", t0.Add(time.Second).UnixNano()), "Node /n1 n1  x1"},
		{"kube-system", fmt.Sprintf("etcd-n1.%x", t0.UnixNano()), "Pod kube-system/etcd-n1 uid-etcd spec.containers{etcd} x2"},
		{"kube-system", fmt.Sprintf("etcd-n1.%x", t0.Add(3*time.Second).UnixNano()), "Pod kube-system/etcd-n1 uid-etcd spec.initContainers{setup} x1"},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("CoreEvents() =\n%v\nwant\n%v", rows, want)
	}
	e := got[1]
	if !e.FirstTimestamp.Time.Equal(t0) || !e.LastTimestamp.Time.Equal(t0.Add(2*time.Second)) || e.ResourceVersion != fmt.Sprint(records[2].Rev) ||
		e.Source != (v1.EventSource{Component: "kubelet", Host: "n1"}) || e.ReportingController != "kubelet" || e.ReportingInstance != "n1" ||
		string(e.UID) != DerivedUID("event", "kube-system/"+e.Name) {
		t.Errorf("repeated event = %+v", e)
	}

	// A record from a staticlet that served no series is one event.
	old := CoreEvent(&RecordedEvent{Event: backoff}, "n1")
	if old.Count != 1 || !old.FirstTimestamp.Time.Equal(backoff.Time) || old.ResourceVersion != "" || old.Name != fmt.Sprintf("etcd-n1.%x", backoff.Time.UnixNano()) {
		t.Errorf("an old record's event = %+v", old)
	}
}
