package kubeapi

import (
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The vendor extensions of the apiserver's OpenAPI documents that clients
// read: kubectl explain finds a resource's schema by its group, version
// and kind.
const (
	extensionGVK    = "x-kubernetes-group-version-kind"
	extensionAction = "x-kubernetes-action"
)

// openAPI serves the OpenAPI documents of the resources the server has:
// /openapi/v2, one document of every group version, and /openapi/v3, an
// index of a document per group version. The documents are built on the
// first request and never change; kube-openapi's handlers give them the
// apiserver's ETags, caching headers and protobuf forms.
type openAPI struct {
	v2 *handler.OpenAPIService
	v3 *handler3.OpenAPIService
	// v3Paths are the group versions' paths under /openapi/v3/, such as
	// api/v1 and apis/events.k8s.io/v1.
	v3Paths []string
}

// newOpenAPI returns the OpenAPI service of s's resources, as they are
// when it is called.
func (s *Server) newOpenAPI() *openAPI {
	o := &openAPI{v3: handler3.NewOpenAPIService()}
	o.v2 = handler.NewOpenAPIServiceLazy(cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		sw, err := s.openAPIV2()
		return sw, "v2", err
	})))
	for _, gv := range s.groupVersions() {
		p := openAPIV3Path(gv)
		o.v3Paths = append(o.v3Paths, p)
		o.v3.UpdateGroupVersionLazy(p, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := s.openAPIV3(gv)
			return doc, p, err
		})))
	}
	return o
}

// register serves the documents on mux.
func (o *openAPI) register(mux *http.ServeMux, notFound http.HandlerFunc) {
	o.v2.RegisterOpenAPIVersionedService("/openapi/v2", mux)
	mux.HandleFunc("GET /openapi/v3", o.v3.HandleDiscovery)
	mux.HandleFunc("GET /openapi/v3/", func(w http.ResponseWriter, r *http.Request) {
		// handler3 answers an empty 200 for a group version it does not
		// have; the apiserver's clients are better told 404.
		if !slices.Contains(o.v3Paths, strings.TrimPrefix(r.URL.Path, "/openapi/v3/")) {
			notFound(w, r)
			return
		}
		o.v3.HandleGroupVersion(w, r)
	})
}

// openAPIV3Path is gv's path under /openapi/v3/.
func openAPIV3Path(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// operation is one operation of the API as its OpenAPI documents describe
// it, before it is written in either version's form.
type operation struct {
	gv     schema.GroupVersion
	path   string
	method string // lower case, as the documents' path items name them
	id     string // operationId, as the apiserver forms it
	action string // x-kubernetes-action
	kind   string // the kind of x-kubernetes-group-version-kind
	// body is the definition name of the request's body, response that of
	// the 200 response's; "" for none (a subresource's stream).
	body, response string
	description    string
	params         []parameter
}

// parameter is a path or query parameter of an operation.
type parameter struct {
	name, in, typ, description string
}

// The parameters the operations take. The query parameters are those the
// server honours.
var (
	paramNamespace = parameter{"namespace", "path", "string", "object name and auth scope, such as for teams and projects"}
	paramName      = parameter{"name", "path", "string", "name of the object"}
	listParams     = []parameter{
		{"labelSelector", "query", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."},
		{"fieldSelector", "query", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."},
	}
	watchParams = []parameter{
		{"resourceVersion", "query", "string", "With watch, the version to start watching from; a version too old to resume from is answered 410 Gone."},
		{"watch", "query", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."},
		{"allowWatchBookmarks", "query", "boolean", "With watch, ask for BOOKMARK events."},
		{"sendInitialEvents", "query", "boolean", "With watch, start with ADDED events of the objects there, then a BOOKMARK."},
		{"timeoutSeconds", "query", "integer", "Timeout for the list/watch call."},
	}
)

// operations lists what the documents say of s's resources in gv: the
// verbs each serves, on the apiserver's paths. A resource whose kind is
// not among the defined names (its package is missing from the generated
// definitions) is left out, with a warning, rather than failing every
// document.
func (s *Server) operations(gv schema.GroupVersion, defined map[string]bool) ([]operation, error) {
	prefix := "/" + openAPIV3Path(gv)
	var ops []operation
	for _, res := range s.resources {
		if res.gv != gv {
			continue
		}
		objName, err := s.codecs.scheme.ToOpenAPIDefinitionName(gv.WithKind(res.kind))
		if err != nil {
			return nil, err
		}
		if !defined[objName] {
			s.log.Warn("the OpenAPI documents leave out a resource whose kind has no generated definition",
				"resource", res.name, "groupVersion", gv.String(), "definition", objName)
			continue
		}
		collection, scope := prefix+"/"+res.name, []parameter(nil)
		if res.namespaced {
			collection, scope = prefix+"/namespaces/{namespace}/"+res.name, []parameter{paramNamespace}
		}
		item := collection + "/{name}"
		op := func(path, method, verb, action, sub string, all bool) operation {
			return operation{
				gv: gv, path: path, method: method, action: action, kind: res.kind,
				id:     operationID(verb, gv, res.kind, sub, res.namespaced, all),
				params: scope,
			}
		}
		for _, verb := range res.verbs() {
			switch verb {
			case verbGet:
				o := op(item, "get", "read", verbGet, "", false)
				o.response, o.params = objName, append(slices.Clip(scope), paramName)
				o.description = "read the specified " + res.kind
				ops = append(ops, o)
			case verbList:
				listName, err := s.codecs.scheme.ToOpenAPIDefinitionName(gv.WithKind(res.kind + "List"))
				if err != nil {
					return nil, err
				}
				query, what := listParams, "list objects of kind "
				if !res.noWatch {
					query, what = append(slices.Clip(listParams), watchParams...), "list or watch objects of kind "
				}
				o := op(collection, "get", "list", verbList, "", false)
				o.response, o.params = listName, append(slices.Clip(scope), query...)
				o.description = what + res.kind
				ops = append(ops, o)
				if res.namespaced {
					all := op(prefix+"/"+res.name, "get", "list", verbList, "", true)
					all.response, all.params, all.description = listName, query, o.description
					ops = append(ops, all)
				}
			case verbCreate:
				o := op(collection, "post", "create", verbCreate, "", false)
				o.body, o.response = objName, objName
				o.description = "create a " + res.kind
				ops = append(ops, o)
			}
		}
		for _, name := range sortedKeys(res.subresources) {
			for _, verb := range res.subresources[name].verbs {
				method, word := subresourceMethod(verb)
				if method == "" {
					continue
				}
				o := op(item+"/"+name, method, word, verb, name, false)
				o.params = append(slices.Clip(scope), paramName)
				o.description = verb + " " + name + " of the specified " + res.kind
				ops = append(ops, o)
			}
		}
	}
	return ops, nil
}

// subresourceMethod is the HTTP method of a subresource's verb and the
// word the apiserver's operation IDs give it; "" for a verb no method
// serves.
func subresourceMethod(verb string) (method, word string) {
	switch verb {
	case verbGet:
		return "get", "read"
	case verbCreate:
		return "post", "create"
	case verbUpdate:
		return "put", "replace"
	case verbPatch:
		return "patch", "patch"
	case verbDelete:
		return "delete", "delete"
	}
	return "", ""
}

// operationID names an operation as the apiserver does:
// readCoreV1NamespacedPod, listEventsV1EventForAllNamespaces,
// readCoreV1NamespacedPodLog.
func operationID(word string, gv schema.GroupVersion, kind, sub string, namespaced, all bool) string {
	var b strings.Builder
	b.WriteString(word)
	b.WriteString(groupWord(gv.Group))
	b.WriteString(upperFirst(gv.Version))
	if namespaced && !all {
		b.WriteString("Namespaced")
	}
	b.WriteString(kind)
	b.WriteString(upperFirst(sub))
	if all {
		b.WriteString("ForAllNamespaces")
	}
	return b.String()
}

// groupWord is a group as operation IDs and tags spell it: Core for the
// core group, Events for events.k8s.io.
func groupWord(group string) string {
	if group == "" {
		return "Core"
	}
	var b strings.Builder
	for part := range strings.SplitSeq(strings.TrimSuffix(group, ".k8s.io"), ".") {
		b.WriteString(upperFirst(part))
	}
	return b.String()
}

// openAPITag is the tag of gv's operations: core_v1, events_v1.
func openAPITag(gv schema.GroupVersion) string {
	w := groupWord(gv.Group)
	return strings.ToLower(w[:1]) + w[1:] + "_" + gv.Version
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// definitionNamer names the generated definitions and gives the ones of
// the scheme's kinds their x-kubernetes-group-version-kind, as the
// apiserver's namer does.
type definitionNamer map[string][]any

func newDefinitionNamer(scheme *runtime.Scheme) definitionNamer {
	gvks := map[string][]schema.GroupVersionKind{}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			continue
		}
		gvks[name] = append(gvks[name], gvk)
	}
	n := definitionNamer{}
	for name, list := range gvks {
		slices.SortFunc(list, func(a, b schema.GroupVersionKind) int {
			return strings.Compare(a.Group+"/"+a.Version+"/"+a.Kind, b.Group+"/"+b.Version+"/"+b.Kind)
		})
		for _, gvk := range list {
			n[name] = append(n[name], map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
	}
	return n
}

// name is a common.Config's GetDefinitionName: the generated definitions
// are keyed by their model names already.
func (n definitionNamer) name(name string) (string, spec.Extensions) {
	if gvks, ok := n[name]; ok {
		return name, spec.Extensions{extensionGVK: gvks}
	}
	return name, nil
}
