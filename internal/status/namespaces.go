package status

import (
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fixedNamespaces are the namespaces the store always lists, whatever is
// in them, as in a cluster: "default", where clients look when told no
// namespace, and "kube-node-lease", the node's Lease's. A namespace added
// here is listed from the store's start and never goes.
func fixedNamespaces() []string {
	return []string{defaultNamespace, v1.NamespaceNodeLease}
}

// namespaceSet is the namespaces in use, with their history: a namespace
// is in use while a pod, ConfigMap or Secret is in it, or always for a
// fixed one. Guarded by Store.mu.
type namespaceSet struct {
	inUse map[string]*namespaceUse
	log   changeLog[*v1.Namespace]
}

// namespaceUse is one namespace in use: how many pods and objects are in
// it, and the namespace as served, never changed once made.
type namespaceUse struct {
	refs int
	ns   *v1.Namespace
}

// newNamespaceSet returns the fixed namespaces, made at the store's
// start: revision start, time now.
func newNamespaceSet(start uint64, now time.Time) namespaceSet {
	set := namespaceSet{inUse: map[string]*namespaceUse{}, log: newChangeLog[*v1.Namespace](start)}
	for _, name := range fixedNamespaces() {
		// One reference that is never dropped keeps it listed.
		set.inUse[name] = &namespaceUse{refs: 1, ns: apiNamespace(name, start, now)}
	}
	return set
}

// namespaceUsedLocked counts one pod or object more (delta 1) or fewer
// (delta -1) in namespace name. The first one in makes the namespace
// appear, and the last one out makes it go: each a change at the store's
// current revision, that of the change of the pod or object which made
// it. s.mu is held.
func (s *Store) namespaceUsedLocked(name string, delta int) {
	set := &s.namespaces
	u := set.inUse[name]
	if u == nil {
		if delta <= 0 {
			return
		}
		u = &namespaceUse{ns: apiNamespace(name, s.revs.rev, time.Now())}
		set.inUse[name] = u
		set.log.add(Change[*v1.Namespace]{Rev: s.revs.rev, Type: WatchAdded, Object: u.ns})
	}
	u.refs += delta
	if u.refs > 0 {
		return
	}
	delete(set.inUse, name)
	gone := u.ns.DeepCopy()
	gone.ResourceVersion = strconv.FormatUint(s.revs.rev, 10)
	set.log.add(Change[*v1.Namespace]{Rev: s.revs.rev, Type: WatchDeleted, Object: gone})
}

// apiNamespace is the namespace name as the API serves it: Active, made
// at created, with resourceVersion rev.
func apiNamespace(name string, rev uint64, created time.Time) *v1.Namespace {
	return &v1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(DerivedUID("namespace", name)),
			ResourceVersion:   strconv.FormatUint(rev, 10),
			CreationTimestamp: metav1.NewTime(created.Truncate(time.Second)),
			Labels:            map[string]string{"kubernetes.io/metadata.name": name},
		},
		Spec:   v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}},
		Status: v1.NamespaceStatus{Phase: v1.NamespaceActive},
	}
}

// NamespacesAt returns the namespaces in use, sorted by name, and the
// store's revision they are the state at. A namespace's resourceVersion
// is the revision it appeared at.
func (s *Store) NamespacesAt() ([]v1.Namespace, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]v1.Namespace, 0, len(s.namespaces.inUse))
	for _, u := range s.namespaces.inUse {
		out = append(out, *u.ns.DeepCopy())
	}
	slices.SortFunc(out, func(a, b v1.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out, s.revs.rev
}

// NamespaceChangesSince returns every namespace that appeared (WatchAdded)
// or went (WatchDeleted) after revision rev, oldest first, or
// ErrRevisionGone when the store no longer has them all.
func (s *Store) NamespaceChangesSince(rev uint64) ([]Change[*v1.Namespace], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return changesSince(&s.namespaces.log, rev, s.revs.rev, copied)
}
