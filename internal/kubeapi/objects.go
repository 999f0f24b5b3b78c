package kubeapi

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
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
	configMaps := s.objectCollection("configmaps", func(ns string) []runtime.Object {
		var out []runtime.Object
		for _, cm := range s.cfg.Store.ConfigMaps(ns) {
			out = append(out, &cm)
		}
		return out
	}, func() runtime.Object { return &v1.ConfigMap{} },
		func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.ConfigMap{}}
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.ConfigMap))
			}
			return list
		}, func(obj runtime.Object) int {
			cm := obj.(*v1.ConfigMap)
			return len(cm.Data) + len(cm.BinaryData)
		})
	secrets := s.objectCollection("secrets", func(ns string) []runtime.Object {
		var out []runtime.Object
		for _, sec := range s.cfg.Store.Secrets(ns) {
			out = append(out, &sec)
		}
		return out
	}, func() runtime.Object { return &v1.Secret{} },
		func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.Secret{}}
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.Secret))
			}
			return list
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

// objectCollection serves ConfigMaps or Secrets: a watch diffs the store's
// objects, whose resourceVersion is a digest of their content.
func (s *Server) objectCollection(resource string, read func(ns string) []runtime.Object, empty func() runtime.Object,
	list func([]runtime.Object, string) runtime.Object, dataCount func(runtime.Object) int) *collection {
	c := &collection{
		resource: v1.Resource(resource),
		snapshot: func(ns string) ([]runtime.Object, uint64) {
			rev := s.cfg.Store.Revision()
			objs := read(ns)
			for _, obj := range objs {
				setContentVersion(obj)
			}
			return objs, rev
		},
		empty: empty,
		list: func(items []runtime.Object, rev string) runtime.Object {
			return s.codecs.typed(list(items, rev))
		},
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

// setContentVersion gives an object that the store does not number a
// resourceVersion that changes with its content.
func setContentVersion(obj runtime.Object) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	m.SetResourceVersion("")
	b, _ := json.Marshal(obj)
	h := fnv.New64a()
	h.Write(b)
	m.SetResourceVersion(fmt.Sprint(h.Sum64() >> 1))
}
