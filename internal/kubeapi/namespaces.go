package kubeapi

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/staticlet/staticlet/internal/status/printers"
)

// namespaceCollection serves the namespaces: "default", "kube-node-lease"
// (the node's Lease's) and every namespace that a pod or an object of the
// manifests is in, all Active, from the store, which keeps their history
// as they appear and go.
func (s *Server) namespaceCollection() *collection {
	return &collection{
		resource: v1.Resource("namespaces"),
		snapshot: func(string) ([]runtime.Object, uint64) {
			nss, rev := s.cfg.Store.NamespacesAt()
			return objectsOf(nss), rev
		},
		since: func(rev uint64) ([]change, error) { return storeChanges(s.cfg.Store.NamespaceChangesSince(rev)) },
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
