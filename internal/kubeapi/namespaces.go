package kubeapi

import (
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// defaultNamespace always exists, as in a cluster: clients list in it when
// told no namespace.
const defaultNamespace = "default"

// namespaceCollection serves the namespaces: "default", "kube-node-lease"
// (the node's Lease's) and every namespace that a pod or an object of the
// manifests is in. They are all Active, and their creation is when the
// server started.
func (s *Server) namespaceCollection() *collection {
	return &collection{
		resource: v1.Resource("namespaces"),
		snapshot: func(string) ([]runtime.Object, uint64) {
			names, rev := s.namespaceNames()
			out := make([]runtime.Object, 0, len(names))
			for _, name := range names {
				ns := &v1.Namespace{
					TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
					ObjectMeta: metav1.ObjectMeta{
						Name: name, UID: types.UID(status.DerivedUID("namespace", name)),
						ResourceVersion:   strconv.FormatUint(s.startRev, 10),
						CreationTimestamp: metav1.NewTime(s.started.Truncate(time.Second)),
						Labels:            map[string]string{"kubernetes.io/metadata.name": name},
					},
					Spec:   v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}},
					Status: v1.NamespaceStatus{Phase: v1.NamespaceActive},
				}
				out = append(out, ns)
			}
			return out, rev
		},
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(obj.(*v1.Namespace).Status.Phase)}
		},
		table: tableForm{
			columns: []metav1.TableColumnDefinition{
				nameColumn(),
				{Name: "Status", Type: "string", Description: "The status of the namespace"},
				ageColumn(),
			},
			cells: func(obj runtime.Object, now time.Time) []any {
				ns := obj.(*v1.Namespace)
				return []any{ns.Name, string(ns.Status.Phase), printers.Age(ns.CreationTimestamp.Time, now)}
			},
		},
		empty: func() runtime.Object {
			return &v1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
		},
		list: func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.Namespace{}}
			list.APIVersion, list.Kind = "v1", "NamespaceList"
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.Namespace))
			}
			return list
		},
	}
}

// namespaceNames are the namespaces in use, sorted, and the revision of
// the pods they were read from.
func (s *Server) namespaceNames() ([]string, uint64) {
	pods, rev := s.cfg.Store.PodsAt()
	names := []string{defaultNamespace, v1.NamespaceNodeLease}
	for _, p := range pods {
		names = append(names, p.Namespace)
	}
	for _, cm := range s.cfg.Store.ConfigMaps("") {
		names = append(names, cm.Namespace)
	}
	for _, sec := range s.cfg.Store.Secrets("") {
		names = append(names, sec.Namespace)
	}
	slices.Sort(names)
	return slices.Compact(names), rev
}
