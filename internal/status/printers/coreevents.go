package printers

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// CoreEvents is events (oldest first) as an apiserver would hold them for
// kubectl's printers: core/v1 Events, the repeats of one as one Event with
// its count and its first and last times, in the order of each one's
// latest repeat, as the table shows them.
func CoreEvents(events []pod.Event) []v1.Event {
	groups := aggregateEvents(events)
	out := make([]v1.Event, len(groups))
	for i, g := range groups {
		out[i] = coreEvent(g)
	}
	return out
}

// coreEvent is a group of repeats as one core/v1 Event, named as the
// kubelet's event recorder names one: its object's name, a dot and the
// first time in hexadecimal nanoseconds. An event of a container points at
// it with the fieldPath the kubelet gives.
func coreEvent(g *eventGroup) v1.Event {
	ref := v1.ObjectReference{Kind: "Node", APIVersion: "v1"}
	ns := metav1.NamespaceDefault
	switch {
	case g.e.Pod != "":
		podNS, name, _ := strings.Cut(g.e.Pod, "/")
		ref = v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: podNS, Name: name}
		ns = podNS
		if g.e.Container != "" {
			ref.FieldPath = "spec.containers{" + g.e.Container + "}"
		}
	case g.e.Object != "":
		kind, name, _ := strings.Cut(g.e.Object, "/")
		if kind == "node" {
			ref.Name = name
		}
	}
	first, last := metav1.NewTime(g.first), metav1.NewTime(g.last)
	return v1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("%s.%x", orName(ref.Name), g.first.UnixNano()),
			Namespace:         ns,
			CreationTimestamp: first,
		},
		InvolvedObject: ref,
		Reason:         g.e.Reason,
		Message:        strings.TrimSpace(g.e.Message),
		Type:           g.e.Type,
		Source:         v1.EventSource{Component: "kubelet"},
		FirstTimestamp: first,
		LastTimestamp:  last,
		Count:          int32(g.count),
	}
}

// orName is name, or "node" for an event of the node that does not name
// it.
func orName(name string) string {
	if name == "" {
		return "node"
	}
	return name
}
