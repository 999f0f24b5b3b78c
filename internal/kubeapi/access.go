package kubeapi

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// authorizationGV is the group version of the access reviews.
var authorizationGV = authorizationv1.SchemeGroupVersion

// readOnlyReason is why a write is denied, whoever asks.
const readOnlyReason = "staticlet serves this node's objects read-only: edit the manifest files"

// nonResourcePaths are the paths outside /api and /apis' resources that
// the API serves, to get: discovery, version, health and the OpenAPI
// documents.
var nonResourcePaths = []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/version", "/openapi", "/openapi/*"}

// writeVerbs are the verbs that would change an object.
var writeVerbs = []string{verbCreate, verbUpdate, verbPatch, verbDelete, verbDeleteCollection}

// The reviews answer by authorize, as the requests are enforced, then by
// what the API serves: what it serves is allowed to whoever authorize
// lets ask, a write of what it serves is denied with the reason (the
// handler answers it 405), and what it does not serve is not allowed,
// "not served".

// createAccessReview answers whether the client may do what the review
// asks (kubectl auth can-i).
func (s *Server) createAccessReview(w http.ResponseWriter, r *http.Request, req request) {
	review := &authorizationv1.SelfSubjectAccessReview{}
	if !s.readReview(w, r, review) {
		return
	}
	user, _ := requestUser(r)
	review.Status = s.decide(user, review.Spec)
	s.writeReview(w, r, review)
}

// specAttributes are the attributes an access review asks about.
func specAttributes(user userInfo, spec authorizationv1.SelfSubjectAccessReviewSpec) attributes {
	if nr := spec.NonResourceAttributes; nr != nil {
		return attributes{user: user, path: nr.Path, verb: nr.Verb}
	}
	ra := spec.ResourceAttributes
	return attributes{user: user, verb: ra.Verb, req: request{
		group: ra.Group, version: ra.Version, namespace: ra.Namespace,
		resource: ra.Resource, subresource: ra.Subresource, name: ra.Name, verb: ra.Verb,
	}}
}

// decide is the answer to one access review by user.
func (s *Server) decide(user userInfo, spec authorizationv1.SelfSubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	if spec.NonResourceAttributes == nil && spec.ResourceAttributes == nil {
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: "the review names neither a resource nor a path"}
	}
	a := specAttributes(user, spec)
	if ok, reason := authorize(a); !ok {
		return authorizationv1.SubjectAccessReviewStatus{Reason: reason}
	}
	if nr := spec.NonResourceAttributes; nr != nil {
		if nr.Verb == verbGet && nonResourceServed(nr.Path) {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the API serves " + nr.Path}
		}
		return authorizationv1.SubjectAccessReviewStatus{Reason: fmt.Sprintf("staticlet does not serve %s %s", nr.Verb, nr.Path)}
	}
	ra := spec.ResourceAttributes
	name := a.req.rbacResource()
	verbs, served := s.servedVerbs(ra.Group, ra.Version, ra.Resource, ra.Subresource)
	switch {
	case served && slices.Contains(verbs, ra.Verb):
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the API serves " + ra.Verb + " of " + qualified(ra.Group, name)}
	case served && slices.Contains(writeVerbs, ra.Verb):
		return authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: readOnlyReason}
	case served:
		return authorizationv1.SubjectAccessReviewStatus{Denied: true,
			Reason: fmt.Sprintf("staticlet serves %s of %s", strings.Join(verbs, ", "), qualified(ra.Group, name))}
	}
	return authorizationv1.SubjectAccessReviewStatus{Reason: "staticlet does not serve " + qualified(ra.Group, name)}
}

// servedVerbs are the verbs the API serves of resource (or its
// subresource) in group, of version when one is given, and whether it
// serves the resource at all.
func (s *Server) servedVerbs(group, version, resource, subresource string) ([]string, bool) {
	for _, res := range s.resources {
		if res.gv.Group != group || res.name != resource || (version != "" && version != "*" && res.gv.Version != version) {
			continue
		}
		if subresource == "" {
			return res.verbs(), true
		}
		if sub, ok := res.subresources[subresource]; ok {
			return sub.verbs, true
		}
	}
	return nil, false
}

// qualified is resource.group, as kubectl names a resource of a group.
func qualified(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// nonResourceServed reports whether p is one of nonResourcePaths.
func nonResourceServed(p string) bool {
	for _, pattern := range nonResourcePaths {
		if ok, _ := path.Match(pattern, p); ok || (strings.HasSuffix(pattern, "/*") && strings.HasPrefix(p, strings.TrimSuffix(pattern, "*"))) {
			return true
		}
	}
	return false
}

// createRulesReview lists what the client may do in the review's
// namespace: every resource the API serves with the verbs it serves and
// authorize allows the client, and the paths it may get.
func (s *Server) createRulesReview(w http.ResponseWriter, r *http.Request, req request) {
	review := &authorizationv1.SelfSubjectRulesReview{}
	if !s.readReview(w, r, review) {
		return
	}
	user, _ := requestUser(r)
	var paths []string
	for _, p := range nonResourcePaths {
		if ok, _ := authorize(attributes{user: user, path: p, verb: verbGet}); ok {
			paths = append(paths, p)
		}
	}
	review.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: s.resourceRules(user, review.Spec.Namespace)}
	if len(paths) > 0 {
		review.Status.NonResourceRules = []authorizationv1.NonResourceRule{{Verbs: []string{verbGet}, NonResourceURLs: paths}}
	}
	s.writeReview(w, r, review)
}

// resourceRules are the served resources and subresources with the
// verbs user may use of them in namespace, one rule each; those it may
// use none of are left out.
func (s *Server) resourceRules(user userInfo, namespace string) []authorizationv1.ResourceRule {
	var out []authorizationv1.ResourceRule
	add := func(gv schema.GroupVersion, resource, subresource string, served []string) {
		var verbs []string
		for _, v := range served {
			a := attributes{user: user, verb: v, req: request{group: gv.Group, version: gv.Version, namespace: namespace,
				resource: resource, subresource: subresource, verb: v}}
			if ok, _ := authorize(a); ok {
				verbs = append(verbs, v)
			}
		}
		if len(verbs) > 0 {
			name := request{resource: resource, subresource: subresource}.rbacResource()
			out = append(out, authorizationv1.ResourceRule{Verbs: verbs, APIGroups: []string{gv.Group}, Resources: []string{name}})
		}
	}
	for _, res := range s.resources {
		add(res.gv, res.name, "", res.verbs())
		for _, name := range sortedKeys(res.subresources) {
			add(res.gv, res.name, name, res.subresources[name].verbs)
		}
	}
	return out
}
