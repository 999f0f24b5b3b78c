package kubeapi

import (
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/staticlet/staticlet/internal/status/printers"
)

// objectResources are the ConfigMaps and Secrets beside the pods: served
// as the status socket serves them, a Secret without its values (its keys
// and sizes stand in the staticlet.io/keys annotation).
func (s *Server) objectResources() []*resource {
	configMaps := s.objectCollection(&collection{
		resource: v1.Resource("configmaps"),
		snapshot: func(ns string) ([]runtime.Object, uint64) {
			cms, rev := s.cfg.Store.ConfigMapsAt(ns)
			return objectsOf(cms), rev
		},
		since: func(rev uint64) ([]change, error) { return storeChanges(s.cfg.Store.ConfigMapChangesSince(rev)) },
		empty: func() runtime.Object { return &v1.ConfigMap{} },
		list: func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.ConfigMap{}}
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.ConfigMap))
			}
			return list
		},
	}, func(obj runtime.Object) int {
		cm := obj.(*v1.ConfigMap)
		return len(cm.Data) + len(cm.BinaryData)
	})
	secrets := s.objectCollection(&collection{
		resource: v1.Resource("secrets"),
		snapshot: func(ns string) ([]runtime.Object, uint64) {
			secs, rev := s.cfg.Store.SecretsAt(ns)
			return objectsOf(secs), rev
		},
		since: func(rev uint64) ([]change, error) { return storeChanges(s.cfg.Store.SecretChangesSince(rev)) },
		empty: func() runtime.Object { return &v1.Secret{} },
		list: func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.Secret{}}
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.Secret))
			}
			return list
		},
	}, nil)
	secrets.table = tableForm{
		columns: []metav1.TableColumnDefinition{nameColumn(),
			{Name: "Type", Type: "string", Description: "Used to facilitate programmatic handling of secret data."},
			{Name: "Data", Type: "integer", Description: "Data contains the secret data."},
			ageColumn()},
		cells: func(obj runtime.Object, now time.Time) []any {
			sec := obj.(*v1.Secret)
			return []any{sec.Name, string(sec.Type), printers.SecretKeyCount(sec), printers.Age(sec.CreationTimestamp.Time, now)}
		},
	}
	writes := func(req request) string {
		return fmt.Sprintf("%s are read from staticlet's manifest files: edit the file that defines it (see the %s annotation)",
			req.resource, "staticlet.io/source")
	}
	return []*resource{
		{gv: v1.SchemeGroupVersion, name: "configmaps", singular: "configmap", kind: "ConfigMap", namespaced: true,
			shortNames: []string{"cm"},
			get:        func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(configMaps, w, r, req) },
			list:       func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(configMaps, w, r, req) },
			writes:     writes},
		{gv: v1.SchemeGroupVersion, name: "secrets", singular: "secret", kind: "Secret", namespaced: true,
			get:    func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(secrets, w, r, req) },
			list:   func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(secrets, w, r, req) },
			writes: writes},
	}
}

// objectCollection completes c, which serves ConfigMaps or Secrets: its
// lists are typed, and, given dataCount, its Table has a Data column.
func (s *Server) objectCollection(c *collection, dataCount func(runtime.Object) int) *collection {
	list := c.list
	c.list = func(items []runtime.Object, rev string) runtime.Object {
		return s.codecs.typed(list(items, rev))
	}
	if dataCount != nil {
		c.table = tableForm{
			columns: []metav1.TableColumnDefinition{nameColumn(),
				{Name: "Data", Type: "integer", Description: "Data contains the configuration data."}, ageColumn()},
			cells: func(obj runtime.Object, now time.Time) []any {
				m := obj.(metav1.Object)
				return []any{m.GetName(), int64(dataCount(obj)), printers.Age(m.GetCreationTimestamp().Time, now)}
			},
		}
	}
	return c
}

// objectsOf is items as objects.
func objectsOf[T any, P interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
