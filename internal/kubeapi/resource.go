package kubeapi

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The verbs of the API, as discovery and authorization name them.
const (
	verbGet              = "get"
	verbList             = "list"
	verbWatch            = "watch"
	verbCreate           = "create"
	verbUpdate           = "update"
	verbPatch            = "patch"
	verbDelete           = "delete"
	verbDeleteCollection = "deletecollection"
)

// request is what a resource request's path and method say, as the
// apiserver's request info: /api/v1/namespaces/ns/pods/name/log is group
// "", version v1, namespace ns, resource pods, name name, subresource log.
type request struct {
	group, version string
	namespace      string
	resource       string
	name           string
	subresource    string
	verb           string
}

// rbacResource is the resource as RBAC and the reviews name it: "pods",
// or with its subresource "pods/exec".
func (r request) rbacResource() string {
	if r.subresource == "" {
		return r.resource
	}
	return r.resource + "/" + r.subresource
}

// handlerFunc serves one request for a resource.
type handlerFunc func(w http.ResponseWriter, r *http.Request, req request)

// resource is one kind of object the API serves: what discovery says of it
// and the handlers of its verbs. Verbs it has no handler for answer 405.
type resource struct {
	gv         schema.GroupVersion
	name       string // plural, lower case: "pods"
	singular   string
	kind       string
	namespaced bool
	shortNames []string
	categories []string
	// get serves a named object; list serves a collection, watches
	// included (watch=true) unless noWatch.
	get, list handlerFunc
	noWatch   bool
	// create serves a POST of a new object: only the reviews, which
	// change nothing, have one.
	create handlerFunc
	// subresources serve name/subresource, by subresource name.
	subresources map[string]subresource
	// writes answers the verbs that would change the object: the reason
	// staticlet does not, for a 405; nil gives a generic one.
	writes func(req request) string
}

// subresource is a subresource of a resource, such as pods/log.
type subresource struct {
	kind  string
	verbs []string
	// serve serves every method the subresource takes.
	serve handlerFunc
}

// verbs lists what discovery advertises for r: what it serves.
func (r *resource) verbs() []string {
	var v []string
	if r.get != nil {
		v = append(v, verbGet)
	}
	if r.list != nil {
		v = append(v, verbList)
		if !r.noWatch {
			v = append(v, verbWatch)
		}
	}
	if r.create != nil {
		v = append(v, verbCreate)
	}
	return v
}

// parseRequest splits an /api or /apis path as the apiserver does. It
// reports false for a path that is no resource request (a discovery
// document).
func parseRequest(r *http.Request) (request, bool) {
	parts := splitPath(r.URL.Path)
	var req request
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		req.version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		req.group, req.version, parts = parts[1], parts[2], parts[3:]
	default:
		return req, false
	}
	if parts[0] == "namespaces" && len(parts) >= 3 {
		req.namespace, parts = parts[1], parts[2:]
	}
	req.resource = parts[0]
	if len(parts) > 1 {
		req.name = parts[1]
	}
	if len(parts) > 2 {
		req.subresource = strings.Join(parts[2:], "/")
	}
	// /api/v1/namespaces/ns is the namespace ns itself.
	req.verb = verbFor(r, req.name != "")
	return req, true
}

func splitPath(path string) []string {
	var parts []string
	for _, p := range strings.Split(strings.Trim(path, "/"), "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// verbFor is the API verb of a request's method.
func verbFor(r *http.Request, named bool) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case isWatch(r):
			return verbWatch
		case named:
			return verbGet
		default:
			return verbList
		}
	case http.MethodPost:
		return verbCreate
	case http.MethodPut:
		return verbUpdate
	case http.MethodPatch:
		return verbPatch
	case http.MethodDelete:
		if named {
			return verbDelete
		}
		return verbDeleteCollection
	}
	return strings.ToLower(r.Method)
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// find returns the resource of group version gv called name.
func (s *Server) find(gv schema.GroupVersion, name string) *resource {
	for _, res := range s.resources {
		if res.gv == gv && res.name == name {
			return res
		}
	}
	return nil
}

// serveResource serves every request under /api/ and /apis/: discovery
// documents of one group version, and resource requests.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	parts := splitPath(r.URL.Path)
	if (parts[0] == "api" && len(parts) == 2) || (parts[0] == "apis" && len(parts) == 3) {
		s.groupVersionResources(w, r, parts)
		return
	}
	if parts[0] == "apis" && len(parts) == 2 {
		s.apiGroup(w, r, parts[1])
		return
	}
	req, ok := parseRequest(r)
	if !ok {
		s.notFound(w, r)
		return
	}
	// /api/v1/namespaces/NAME is a namespace, not a namespaced collection.
	gv := schema.GroupVersion{Group: req.group, Version: req.version}
	res := s.find(gv, req.resource)
	if res == nil || (req.namespace != "" && !res.namespaced) {
		s.notFound(w, r)
		return
	}
	if req.subresource != "" {
		sub, ok := res.subresources[req.subresource]
		if !ok {
			s.notFound(w, r)
			return
		}
		sub.serve(w, r, req)
		return
	}
	switch {
	case req.verb == verbGet && res.get != nil:
		res.get(w, r, req)
	case req.verb == verbCreate && req.name == "" && res.create != nil:
		res.create(w, r, req)
	case (req.verb == verbList || req.verb == verbWatch) && res.list != nil:
		if req.name != "" {
			// A watch of one object: the list, restricted to it.
			q := r.URL.Query()
			sel := "metadata.name=" + req.name
			if fs := q.Get("fieldSelector"); fs != "" {
				sel += "," + fs
			}
			q.Set("fieldSelector", sel)
			r.URL.RawQuery = q.Encode()
		}
		res.list(w, r, req)
	default:
		s.writeStatus(w, r, s.methodNotAllowed(res, req))
	}
}

// methodNotAllowed is the 405 for a verb res does not serve: a write is
// told where the object is defined instead.
func (s *Server) methodNotAllowed(res *resource, req request) error {
	msg := "staticlet serves this node's objects read-only"
	if res.writes != nil {
		msg = res.writes(req)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Message: msg,
		Details: &metav1.StatusDetails{
			Name:  req.name,
			Group: req.group,
			Kind:  req.resource,
		},
	}}
}
