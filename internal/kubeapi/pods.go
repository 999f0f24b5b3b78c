package kubeapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// coreResources are the resources of the core group (v1) and the other
// groups the server always serves.
func (s *Server) coreResources() []*resource {
	pods := s.podCollection()
	nodes := s.nodeCollection()
	namespaces := s.namespaceCollection()
	return []*resource{
		{
			gv: v1.SchemeGroupVersion, name: "pods", singular: "pod", kind: "Pod",
			namespaced: true, shortNames: []string{"po"}, categories: []string{"all"},
			get:          func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(pods, w, r, req) },
			list:         func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(pods, w, r, req) },
			writes:       s.podWrites,
			subresources: s.streamSubresources(),
		},
		{
			gv: v1.SchemeGroupVersion, name: "nodes", singular: "node", kind: "Node",
			shortNames: []string{"no"},
			get:        func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(nodes, w, r, req) },
			list:       func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(nodes, w, r, req) },
			writes: func(request) string {
				return "staticlet serves this node read-only: its name, labels and capacity come from staticlet's flags and the machine"
			},
		},
		{
			gv: v1.SchemeGroupVersion, name: "namespaces", singular: "namespace", kind: "Namespace",
			shortNames: []string{"ns"},
			get:        func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(namespaces, w, r, req) },
			list:       func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(namespaces, w, r, req) },
			writes: func(request) string {
				return "staticlet's namespaces are those its manifests name: a namespace exists while a manifest puts something in it"
			},
		},
	}
}

// podCollection serves the store's pods, with their history.
func (s *Server) podCollection() *collection {
	return &collection{
		resource: v1.Resource("pods"),
		snapshot: func(ns string) ([]runtime.Object, uint64) {
			pods, rev := s.cfg.Store.PodsAt()
			out := make([]runtime.Object, 0, len(pods))
			for i := range pods {
				if ns == "" || pods[i].Namespace == ns {
					out = append(out, &pods[i])
				}
			}
			return out, rev
		},
		since:  func(rev uint64) ([]change, error) { return storeChanges(s.cfg.Store.PodChangesSince(rev)) },
		fields: podFields,
		table:  tableForm{columns: podColumns(), cells: podCells},
		empty:  func() runtime.Object { return &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}} },
		list: func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.Pod{}}
			list.APIVersion, list.Kind = "v1", "PodList"
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.Pod))
			}
			return list
		},
	}
}

func watchType(t status.WatchEventType) watch.EventType {
	switch t {
	case status.WatchAdded:
		return watch.Added
	case status.WatchDeleted:
		return watch.Deleted
	default:
		return watch.Modified
	}
}

// podFields are the fields of a pod a field selector may name, the
// apiserver's.
func podFields(obj runtime.Object) fields.Set {
	p := obj.(*v1.Pod)
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// podColumns are the columns of the pods table, the apiserver's.
func podColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		stringColumn("Ready", "The aggregate readiness state of this pod for accepting traffic.", 0),
		stringColumn("Status", "The aggregate status of the containers in this pod.", 0),
		stringColumn("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0),
		ageColumn(),
		stringColumn("IP", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1),
		stringColumn("Node", "NodeName is a request to schedule this pod onto a specific node.", 1),
		stringColumn("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods on the node.", 1),
		stringColumn("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.", 1),
	}
}

// podCells are a pod's row in the pods table: the cells staticlet's own
// `get pods` prints.
func podCells(obj runtime.Object, now time.Time) []any {
	p := obj.(*v1.Pod)
	ready, st, restarts, age := printers.PodCells(p, now)
	gates := "<none>"
	if n := len(p.Spec.ReadinessGates); n > 0 {
		met := 0
		for _, g := range p.Spec.ReadinessGates {
			for _, c := range p.Status.Conditions {
				if c.Type == g.ConditionType && c.Status == v1.ConditionTrue {
					met++
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", met, n)
	}
	return []any{p.Name, ready, st, restarts, age, orNone(p.Status.PodIP), orNone(p.Spec.NodeName),
		orNone(p.Status.NominatedNodeName), gates}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// podWrites is the reason a write of a pod is refused: the manifest file
// that defines it, which is the one place to change it.
func (s *Server) podWrites(req request) string {
	if req.name == "" {
		return "staticlet runs the pods its manifest files define: add, edit or remove manifest files in " +
			s.sourcesText() + " instead"
	}
	key := req.namespace + "/" + req.name
	path := s.manifestOf(key)
	if path == "" {
		return fmt.Sprintf("pods %q is not defined by any manifest of staticlet's; its pods are changed through the manifest files in %s",
			req.name, s.sourcesText())
	}
	switch req.verb {
	case verbDelete:
		return fmt.Sprintf("pods %q is defined by the manifest %s: remove that file to stop the pod, or run `staticlet restart %s` to restart it; staticlet serves its pods read-only",
			req.name, path, key)
	default:
		return fmt.Sprintf("pods %q is defined by the manifest %s: edit that file to change the pod; staticlet serves its pods read-only",
			req.name, path)
	}
}

// manifestOf is the path of the manifest file (or URL) that defines the
// pod with key "namespace/name", or "".
func (s *Server) manifestOf(key string) string {
	for _, m := range s.cfg.Store.Manifests() {
		for _, p := range m.Pods {
			if p == key {
				return m.Path
			}
		}
	}
	return ""
}

// sourcesText names staticlet's manifest sources.
func (s *Server) sourcesText() string {
	seen := map[string]bool{}
	var out string
	for _, m := range s.cfg.Store.Manifests() {
		if m.Source == "" || seen[m.Source] {
			continue
		}
		seen[m.Source] = true
		if out != "" {
			out += " and "
		}
		out += m.Source
	}
	if out == "" {
		return "staticlet's manifest directory"
	}
	return out
}
