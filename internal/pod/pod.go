// Package pod is the vocabulary every other staticlet package shares: it turns
// manifest bytes into validated, defaulted core/v1 Pods and owns their
// identity (key, UID, hashes, source). It does no I/O and starts no
// goroutines; every function is safe for concurrent use.
package pod

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Annotations the kubelet sets on static pods, kept so that tools and habits
// carry over.
const (
	AnnotationSource = "kubernetes.io/config.source"
	AnnotationHash   = "kubernetes.io/config.hash"
	AnnotationSeen   = "kubernetes.io/config.seen"
)

// Source kinds, the values of AnnotationSource.
const (
	SourceFile = "file"
	SourceHTTP = "http"
)

// Key identifies a pod across edits of its manifest: the namespace and the
// full name (metadata.name with the node name appended).
type Key struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Pod is one desired static pod: the defaulted core/v1 Pod as it will run
// (full name, UID and annotations set) plus where it came from and the hashes
// that decide what must restart when it changes.
type Pod struct {
	*v1.Pod

	// Source is the file path or URL the pod was read from.
	Source string
	// SandboxHash covers everything but the app containers: when it changes the
	// whole pod is replaced; when only a container's hash changes, only that
	// container is restarted.
	SandboxHash string

	// Objects are the ConfigMaps and Secrets the pod refers to that its
	// namespace has, as Resolve found them; a reference missing here is
	// to an object that does not exist (yet). ObjectsHash digests them and
	// the missing ones: it changes when an object the pod refers to is
	// added, edited or removed. Neither takes part in the pod's hashes: a
	// new value of an object restarts nothing by itself.
	Objects     map[ObjectKey]*Object
	ObjectsHash string
}

// Key returns the pod's key.
func (p *Pod) Key() Key { return Key{Namespace: p.Namespace, Name: p.Name} }

// String returns the pod's key as text.
func (p *Pod) String() string { return fmt.Sprintf("%s/%s", p.Namespace, p.Name) }

// Event types, as in core/v1 events.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is something that happened to a pod or one of its containers, in the
// shape kubectl shows events (type, reason, message).
type Event struct {
	Time      time.Time `json:"time"`
	Pod       string    `json:"pod"`                 // namespace/name
	Container string    `json:"container,omitempty"` // empty for pod-level events
	Type      string    `json:"type"`                // EventNormal or EventWarning
	Reason    string    `json:"reason"`              // e.g. Started, BackOff, Killing
	Message   string    `json:"message"`
	// Object is what a node-level event (one with no Pod) is about, as
	// kind/name: "node/node1"; empty for a pod's events.
	Object string `json:"object,omitempty"`
}
