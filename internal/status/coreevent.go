package status

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventComponent is the component that reports staticlet's events, the
// kubelet's name for itself.
const EventComponent = "kubelet"

// CoreEvent is the core/v1 Event the kubelet's recorder would have made
// of the series of repeats r ends, on node: named after its pod (or node)
// and the time of the first, counting them. The Kubernetes API and the
// CLI's printers both show events as this makes them.
func CoreEvent(r *RecordedEvent, node string) v1.Event {
	ref := v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
	ns := defaultNamespace
	if r.Pod != "" {
		podNS, name, _ := strings.Cut(r.Pod, "/")
		ns = podNS
		ref = v1.ObjectReference{Kind: "Pod", Namespace: podNS, Name: name, UID: types.UID(r.UID), APIVersion: "v1"}
		if r.Container != "" {
			ref.FieldPath = r.FieldPath
			if ref.FieldPath == "" {
				ref.FieldPath = ContainerFieldPath(nil, r.Container)
			}
		}
	} else if kind, name, ok := strings.Cut(r.Object, "/"); ok && !strings.EqualFold(kind, "node") {
		ref = v1.ObjectReference{Kind: kindOf(kind), Name: name}
	}
	firstTime, count := r.First, r.Count
	if firstTime.IsZero() || count == 0 { // a record of an older staticlet
		firstTime, count = r.Time, 1
	}
	name := fmt.Sprintf("%s.%x", ref.Name, firstTime.UnixNano())
	first, last := metav1.NewTime(firstTime), metav1.NewTime(r.Time)
	meta := metav1.ObjectMeta{
		Name: name, Namespace: ns, UID: types.UID(DerivedUID("event", ns+"/"+name)),
		CreationTimestamp: first,
	}
	if r.Rev != 0 {
		meta.ResourceVersion = strconv.FormatUint(r.Rev, 10)
	}
	return v1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          meta,
		InvolvedObject:      ref,
		Reason:              r.Reason,
		Message:             r.Message,
		Source:              v1.EventSource{Component: EventComponent, Host: node},
		FirstTimestamp:      first,
		LastTimestamp:       last,
		Count:               count,
		Type:                r.Type,
		ReportingController: EventComponent,
		ReportingInstance:   node,
	}
}

// CoreEvents is records (oldest first, as EventsAt returns them) as an
// apiserver holds them: one core/v1 Event per series, in the state of its
// latest repeat, ordered by namespace and name.
func CoreEvents(records []RecordedEvent, node string) []v1.Event {
	latest := map[string]v1.Event{}
	for i := range records {
		e := CoreEvent(&records[i], node)
		latest[e.Namespace+"/"+e.Name] = e
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]v1.Event, len(keys))
	for i, k := range keys {
		out[i] = latest[k]
	}
	return out
}

// ContainerFieldPath is how an event names a container of pod p, as the
// kubelet's references do; p may be nil (a pod not stored).
func ContainerFieldPath(p *v1.Pod, name string) string {
	if p != nil {
		for _, c := range p.Spec.InitContainers {
			if c.Name == name {
				return "spec.initContainers{" + name + "}"
			}
		}
		for _, c := range p.Spec.EphemeralContainers {
			if c.Name == name {
				return "spec.ephemeralContainers{" + name + "}"
			}
		}
	}
	return "spec.containers{" + name + "}"
}

// kindOf turns the lower-case kind of a pod.Event's Object into a Kind.
func kindOf(kind string) string {
	if kind == "" {
		return ""
	}
	return strings.ToUpper(kind[:1]) + kind[1:]
}

// DerivedUID is a UID for an object staticlet makes up (the node, the
// namespaces, the events), the same in every run: a version 5 style UUID
// of its kind and name.
func DerivedUID(kind, name string) string {
	h := sha256.Sum256([]byte("staticlet/" + kind + "/" + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
