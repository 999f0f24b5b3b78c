package status

import (
	"errors"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// ErrRevisionGone is returned for a resource version the store no longer
// has the changes after (or never had: one from before this staticlet
// started); the caller lists again, as a Kubernetes client does on 410 Gone.
var ErrRevisionGone = errors.New("resource version too old")

// revisions is the store's history of pod changes: every change that
// alters a pod gets the next revision, which becomes the pod's
// resourceVersion, as in the apiserver; so does every event recorded
// (events.go), so that one revision orders both. Revisions start from the clock in
// microseconds, so that they grow across restarts of staticlet and a
// client's resource version from an earlier run is too old, never mistaken
// for a current one. Guarded by Store.mu.
type revisions struct {
	rev uint64
	// pods is the history of the pods' changes.
	pods changeLog[*v1.Pod]
	// node is the revision of the node's latest change.
	node uint64
}

func newRevisions(now time.Time) revisions {
	start := uint64(now.UnixMicro())
	return revisions{rev: start, pods: newChangeLog[*v1.Pod](start), node: start}
}

// record gives a pod change the next revision and keeps it in history.
func (r *revisions) record(typ WatchEventType, p *v1.Pod) {
	rev := r.bump()
	p.ResourceVersion = strconv.FormatUint(rev, 10)
	r.pods.add(Change[*v1.Pod]{Rev: rev, Type: typ, Object: p})
}

// nodeChangedLocked gives a change of the node the next revision and
// wakes the subscribers. s.mu is held.
func (s *Store) nodeChangedLocked() {
	s.revs.rev++
	s.revs.node = s.revs.rev
	s.othersChangedLocked()
}

// since returns the pods' changes after rev, oldest first, each pod a
// copy whose resourceVersion is its change's revision.
func (r *revisions) since(rev uint64) ([]Change[*v1.Pod], error) {
	return changesSince(&r.pods, rev, r.rev, copied)
}

// setPodLocked stores c under key, giving it a new revision unless it is
// the pod already stored with nothing changed. s.mu is held.
func (s *Store) setPodLocked(key pod.Key, c *v1.Pod) {
	old, ok := s.pods[key]
	if c.CreationTimestamp.IsZero() {
		c.CreationTimestamp = creationTime(old, c)
	}
	if ok {
		c.ResourceVersion = old.ResourceVersion
		if equality.Semantic.DeepEqual(old, c) {
			return
		}
	}
	typ := WatchAdded
	if ok {
		typ = WatchModified
	}
	s.pods[key] = c
	s.revs.record(typ, c)
	if !ok {
		s.namespaceUsedLocked(key.Namespace, 1)
	}
}

// creationTime is the creationTimestamp of a pod reported without one, as
// the reconciler reports them: the one it was stored with before, else its
// start time when it has started (a pod adopted after a restart), else
// now, when staticlet first reports it. Clients such as kubectl and k9s
// show a pod's AGE from it.
func creationTime(old, p *v1.Pod) metav1.Time {
	switch {
	case old != nil && !old.CreationTimestamp.IsZero():
		return old.CreationTimestamp
	case p.Status.StartTime != nil && !p.Status.StartTime.IsZero():
		return *p.Status.StartTime
	default:
		return metav1.NewTime(time.Now().Truncate(time.Second))
	}
}

// deletePodLocked forgets the pod under key, recording its deletion. s.mu
// is held.
func (s *Store) deletePodLocked(key pod.Key) bool {
	old, ok := s.pods[key]
	if !ok {
		return false
	}
	delete(s.pods, key)
	s.revs.record(WatchDeleted, old.DeepCopy())
	s.namespaceUsedLocked(key.Namespace, -1)
	return true
}

// PodsAt returns copies of every pod, sorted by namespace then name, and
// the store's revision they are the state at.
func (s *Store) PodsAt() ([]v1.Pod, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.sortedKeysLocked()
	out := make([]v1.Pod, 0, len(keys))
	for _, k := range keys {
		out = append(out, *s.pods[k].DeepCopy())
	}
	return out, s.revs.rev
}

// PodChangesSince returns every change of a pod after revision rev, oldest
// first, or ErrRevisionGone when the store no longer has them all.
func (s *Store) PodChangesSince(rev uint64) ([]Change[*v1.Pod], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs.since(rev)
}

// Revision returns the store's current revision: that of its latest pod
// change or event.
func (s *Store) Revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs.rev
}
