package kubeapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// The node's Lease, as the kubelet keeps it: 40 s long unless
// Config.LeaseDurationSeconds says otherwise (its default
// nodeLeaseDurationSeconds), renewed every quarter of that.
const (
	defaultLeaseSeconds = 40
	nodeLeaseAPIVersion = "coordination.k8s.io/v1"
	nodeLeaseWriteText  = "staticlet keeps this node's Lease itself, renewing it while its reconcile loop runs; it is read-only"
)

// nodeLease is the renewal of the node's Lease, which reads make: a read
// renews it when the heartbeat has moved a renew period or more past the
// last renewal (or back before it, when the clock was set back). Its renewTime is so always a heartbeat, at most a renew
// period older than the latest, as a kubelet's lease is at most that
// older than its last sign of life; and it stops when the heartbeat
// does.
type nodeLease struct {
	mu sync.Mutex
	// renewed is the heartbeat of the last renewal; zero before the
	// first.
	renewed time.Time
	// rev is the Lease's resourceVersion, which each renewal moves on.
	rev uint64
}

// renew renews the lease at heartbeat beat if it is due, and returns its
// renewTime and resourceVersion. storeRev is the store's revision, which
// a renewal's resourceVersion is past, so that it is newer than any list's
// the client may watch from.
func (l *nodeLease) renew(beat time.Time, every time.Duration, storeRev uint64) (time.Time, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		l.rev = storeRev
	}
	// A heartbeat before the last renewal is the clock stepped back.
	if d := beat.Sub(l.renewed); !beat.IsZero() && (l.renewed.IsZero() || d >= every || d < 0) {
		l.renewed = beat.Truncate(time.Microsecond)
		l.rev = max(storeRev, l.rev) + 1
	}
	return l.renewed, l.rev
}

// leaseSeconds is the Lease's leaseDurationSeconds.
func (s *Server) leaseSeconds() int32 {
	if s.cfg.LeaseDurationSeconds > 0 {
		return s.cfg.LeaseDurationSeconds
	}
	return defaultLeaseSeconds
}

// leaseRenewPeriod is how often the Lease is renewed: a quarter of its
// duration, as the kubelet's renewInterval.
func (s *Server) leaseRenewPeriod() time.Duration {
	if s.cfg.leaseRenew > 0 {
		return s.cfg.leaseRenew
	}
	return time.Duration(s.leaseSeconds()) * time.Second / 4
}

// leaseResources is coordination.k8s.io's leases: the node's Lease in
// kube-node-lease, read-only.
func (s *Server) leaseResources() []*resource {
	c := s.leaseCollection()
	return []*resource{{
		gv: coordinationv1.SchemeGroupVersion, name: "leases", singular: "lease", kind: "Lease", namespaced: true,
		get:    func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(c, w, r, req) },
		list:   func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(c, w, r, req) },
		writes: func(request) string { return nodeLeaseWriteText },
	}}
}

// leaseCollection serves the one Lease, renewed as it is read.
func (s *Server) leaseCollection() *collection {
	return &collection{
		resource: coordinationv1.Resource("leases"),
		snapshot: func(string) ([]runtime.Object, uint64) {
			lease, rev := s.nodeLeaseObject()
			return []runtime.Object{lease}, max(rev, s.cfg.Store.Revision())
		},
		// A watch from a resourceVersion sees the renewals after it.
		since: func(from uint64) ([]change, error) {
			if lease, rev := s.nodeLeaseObject(); rev > from {
				return []change{{typ: watch.Modified, obj: lease, rev: rev}}, nil
			}
			return nil, nil
		},
		// A quarter of the period: a watch sees a renewal at most that
		// (and a heartbeat's step) after it is due.
		refresh: s.leaseRenewPeriod() / 4,
		table: tableForm{
			columns: []metav1.TableColumnDefinition{nameColumn(),
				stringColumn("Holder", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"], 0),
				ageColumn()},
			cells: func(obj runtime.Object, now time.Time) []any {
				l := obj.(*coordinationv1.Lease)
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				return []any{l.Name, holder, printers.Age(l.CreationTimestamp.Time, now)}
			},
		},
		empty: func() runtime.Object {
			return &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: nodeLeaseAPIVersion, Kind: "Lease"}}
		},
		list: func(items []runtime.Object, rev string) runtime.Object {
			list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []coordinationv1.Lease{}}
			list.APIVersion, list.Kind = nodeLeaseAPIVersion, "LeaseList"
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*coordinationv1.Lease))
			}
			return list
		},
	}
}

// nodeLeaseObject is the node's Lease as the kubelet makes it: named
// after the node, held by it, owned by the Node, created when staticlet
// started; renewed at the heartbeat (see nodeLease), unrenewed before the
// first. rev is its resourceVersion.
func (s *Server) nodeLeaseObject() (*coordinationv1.Lease, uint64) {
	beat := time.Now()
	if s.cfg.Heartbeat != nil {
		beat = s.cfg.Heartbeat()
	}
	renewed, rev := s.lease.renew(beat, s.leaseRenewPeriod(), s.cfg.Store.Revision())
	node := s.node()
	created := node.CreationTimestamp
	if created.IsZero() {
		created = metav1.NewTime(s.started.Truncate(time.Second))
	}
	holder, seconds := node.Name, s.leaseSeconds()
	lease := &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: nodeLeaseAPIVersion, Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name, Namespace: v1.NamespaceNodeLease,
			UID:               types.UID(status.DerivedUID("lease", v1.NamespaceNodeLease+"/"+node.Name)),
			ResourceVersion:   strconv.FormatUint(rev, 10),
			CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &seconds,
		},
	}
	if !renewed.IsZero() {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	}
	return lease, rev
}
