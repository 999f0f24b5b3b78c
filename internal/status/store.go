package status

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// maxEvents is how many recent events the Store keeps; older ones are
// dropped first.
const maxEvents = 1000

// defaultNamespace is the namespace a bare pod name resolves to first, as in
// kubectl.
const defaultNamespace = "default"

// Manifest is the result of reading one manifest file (or URL): the pods it
// defines, or why it could not be used.
type Manifest struct {
	// Source is the source that read the file: a manifest directory or a URL.
	Source string `json:"source"`
	// Path is the file path, or the URL for an HTTP source.
	Path string `json:"path"`
	// Pods are the keys ("namespace/name") of the pods the file defines.
	Pods []string `json:"pods,omitempty"`
	// Objects are the keys of the ConfigMaps and Secrets the file defines,
	// as "configmap/namespace/name".
	Objects []string `json:"objects,omitempty"`
	// Error says why the file was rejected; empty when it was accepted.
	Error string `json:"error,omitempty"`
	// LastSuccess is, for a URL whose last poll failed, when it last served
	// good manifests (zero if it never did, and for files).
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
}

// Store is the observed state that staticlet reports: pods, recent events,
// manifest results and readiness. The zero value is not usable; call
// NewStore. All methods are safe for concurrent use.
type Store struct {
	// changed carries one coalesced signal per burst of changes.
	changed chan struct{}

	// mu guards the fields below.
	mu   sync.Mutex
	pods map[pod.Key]*v1.Pod
	// events are the recent events (see events.go).
	events    eventRing
	subs      map[*Subscription]struct{}
	manifests []Manifest
	imports   []ImportFile
	ready     bool
	readyAt   time.Time
	activity  string // what staticlet as a whole is doing, if anything special
	// node and nodeConditions are the node of GET /node (see node.go).
	node nodeState
	// objects are the ConfigMaps and Secrets in force (see objects.go).
	objects objectSet
	// revs numbers the pods' changes (see revision.go).
	revs revisions
	// namespaces are those in use (see namespaces.go).
	namespaces namespaceSet
}

// NewStore returns an empty store that is not ready, configured by opts.
func NewStore(opts ...StoreOption) *Store {
	now := time.Now()
	s := &Store{
		changed: make(chan struct{}, 1),
		pods:    make(map[pod.Key]*v1.Pod),
		subs:    make(map[*Subscription]struct{}),
		revs:    newRevisions(now),
	}
	s.events = newEventRing(s.revs.rev)
	s.objects = newObjectSet(s.revs.rev)
	s.namespaces = newNamespaceSet(s.revs.rev, now)
	for _, o := range opts {
		o(s)
	}
	return s
}

// notify signals Changed without blocking: a signal already pending stands
// for this change too.
func (s *Store) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Changed returns a channel that receives a value after the store changes.
// Changes made while a value is pending are coalesced into it, so a receiver
// must re-read the state it cares about rather than count signals. There is
// one channel per Store: meant for a single consumer (the Notifier).
func (s *Store) Changed() <-chan struct{} { return s.changed }

// SetPod records p, replacing any pod with the same namespace and name. The
// store keeps a deep copy, with apiVersion and kind set, and its
// resourceVersion set to the revision of its latest change.
func (s *Store) SetPod(p *v1.Pod) {
	c := p.DeepCopy()
	c.APIVersion, c.Kind = "v1", "Pod"
	s.mu.Lock()
	key := pod.Key{Namespace: c.Namespace, Name: c.Name}
	s.setPodLocked(key, c)
	s.podChangedLocked(key)
	s.mu.Unlock()
	s.notify()
}

// DeletePod forgets the pod with the given key; its events are kept.
func (s *Store) DeletePod(key pod.Key) {
	s.mu.Lock()
	ok := s.deletePodLocked(key)
	if ok {
		s.podChangedLocked(key)
	}
	s.mu.Unlock()
	if ok {
		s.notify()
	}
}

// Pods returns copies of every pod, sorted by namespace then name.
func (s *Store) Pods() []v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.sortedKeysLocked()
	out := make([]v1.Pod, 0, len(keys))
	for _, k := range keys {
		out = append(out, *s.pods[k].DeepCopy())
	}
	return out
}

func (s *Store) sortedKeysLocked() []pod.Key {
	keys := make([]pod.Key, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pod.Key) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return keys
}

// Pod returns a copy of the pod called name, and whether there is exactly one.
//
// A name containing a slash is "namespace/name"; a bare name resolves to the
// pod of that name in namespace "default" if there is one (as kubectl
// would), otherwise to the only pod of that name in any namespace. A bare
// name found in several namespaces, none of them "default", is ambiguous
// and reported as not found.
//
// The name is the pod's full name, as `get pods` shows it, or, when no pod
// has that full name, its manifest's metadata.name (the full name without
// the node's suffix, see pod.FullName), by the same rule.
func (s *Store) Pod(name string) (*v1.Pod, bool) {
	p, _ := s.find(name)
	return p, p != nil
}

// find implements Pod's rule; when the name is ambiguous it returns nil and
// the candidates.
func (s *Store) find(name string) (*v1.Pod, []pod.Key) {
	ns, bare, qualified := strings.Cut(name, "/")
	if !qualified {
		ns, bare = "", name
	}
	fullName := func(p *v1.Pod) bool { return p.Name == bare }
	manifestName := func(p *v1.Pod) bool {
		return p.Spec.NodeName != "" && p.Name == pod.FullName(bare, p.Spec.NodeName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, named := range []func(*v1.Pod) bool{fullName, manifestName} {
		if p, matches := s.findLocked(ns, named); p != nil || len(matches) > 0 {
			return p, matches
		}
	}
	return nil, nil
}

// findLocked returns the pod that named selects in namespace ns, or, when
// ns is empty, the one in "default", else the only one in any namespace;
// when there are several it returns nil and their keys.
func (s *Store) findLocked(ns string, named func(*v1.Pod) bool) (*v1.Pod, []pod.Key) {
	var matches []pod.Key
	for _, k := range s.sortedKeysLocked() {
		p := s.pods[k]
		if !named(p) || (ns != "" && k.Namespace != ns) {
			continue
		}
		if ns == "" && k.Namespace == defaultNamespace {
			return p.DeepCopy(), nil
		}
		matches = append(matches, k)
	}
	if len(matches) == 1 {
		return s.pods[matches[0]].DeepCopy(), nil
	}
	return nil, matches
}

func matchPod(key, filter string) bool {
	if filter == "" || key == filter {
		return true
	}
	if strings.Contains(filter, "/") {
		return false
	}
	_, name, _ := strings.Cut(key, "/")
	return name == filter
}

// SetManifests replaces the per-file manifest results. The store keeps a
// copy.
func (s *Store) SetManifests(m []Manifest) {
	c := cloneManifests(m)
	s.mu.Lock()
	s.manifests = c
	s.mu.Unlock()
	s.notify()
}

// Manifests returns a copy of the per-file manifest results, never nil.
func (s *Store) Manifests() []Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneManifests(s.manifests)
}

func cloneManifests(m []Manifest) []Manifest {
	out := make([]Manifest, len(m))
	for i, x := range m {
		x.Pods = slices.Clone(x.Pods)
		x.Objects = slices.Clone(x.Objects)
		out[i] = x
	}
	return out
}

// SetReady records that every source has been read once and the first
// reconcile pass has been issued. Readiness never goes back.
func (s *Store) SetReady() {
	s.mu.Lock()
	was := s.ready
	if !was {
		s.readyAt = time.Now()
		s.nodeChangedLocked()
	}
	s.ready = true
	s.mu.Unlock()
	if !was {
		s.notify()
	}
}

// Ready reports whether SetReady has been called.
func (s *Store) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// Summary returns a one-line summary for systemd's STATUS, such as
// "5 pods: 4 running, 1 failed, 4 ready; 1 manifest error; 1 image import
// error; DiskPressure", prefixed with "starting: " until the store is
// ready; a node condition that is true (DiskPressure) ends it.
func (s *Store) Summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	pods := make([]*v1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		pods = append(pods, p)
	}
	errs := 0
	for _, m := range s.manifests {
		if m.Error != "" {
			errs++
		}
	}
	importErrs := 0
	for _, f := range s.imports {
		if f.Error != "" {
			importErrs++
		}
	}
	sum := summarize(pods, errs, s.ready)
	if importErrs > 0 {
		sum += "; " + plural(importErrs, "image import error", "image import errors")
	}
	for _, p := range s.pressureLocked() {
		sum += "; " + p
	}
	if s.activity != "" {
		return s.activity + "; " + sum
	}
	return sum
}

// SetActivity names what staticlet as a whole is doing, such as stopping
// the pods for a node shutdown: it leads the summary until set to "".
func (s *Store) SetActivity(a string) {
	s.mu.Lock()
	s.activity = a
	s.mu.Unlock()
	s.notify()
}

// summarize formats Summary. Pods are counted by phase: "running" always,
// then pending, succeeded, failed and unknown when not zero (a pod with no
// phase yet counts as pending), then how many have condition Ready true.
func summarize(pods []*v1.Pod, manifestErrors int, ready bool) string {
	var b strings.Builder
	if !ready {
		b.WriteString("starting: ")
	}
	b.WriteString(plural(len(pods), "pod", "pods"))
	if len(pods) > 0 {
		counts := map[v1.PodPhase]int{}
		nready := 0
		for _, p := range pods {
			phase := p.Status.Phase
			if phase == "" {
				phase = v1.PodPending
			}
			counts[phase]++
			if podReady(p) {
				nready++
			}
		}
		fmt.Fprintf(&b, ": %d running", counts[v1.PodRunning])
		for _, ph := range []v1.PodPhase{v1.PodPending, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown} {
			if n := counts[ph]; n > 0 {
				fmt.Fprintf(&b, ", %d %s", n, strings.ToLower(string(ph)))
			}
		}
		fmt.Fprintf(&b, ", %d ready", nready)
	}
	if manifestErrors > 0 {
		b.WriteString("; " + plural(manifestErrors, "manifest error", "manifest errors"))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// podReady reports whether p has condition Ready true.
func podReady(p *v1.Pod) bool {
	return conditionTrue(p, v1.PodReady)
}

func conditionTrue(p *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
