package kubeapi

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
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

// Every client with a certificate of the API's CA has the same rights:
// the API authorizes nothing beyond authentication, and what it serves
// is what anyone authenticated may do. The reviews say that: what the
// API serves is allowed, a write of what it serves denied with the
// reason, and what it does not serve is not allowed, "not served".

// createAccessReview answers whether the client may do what the review
// asks (kubectl auth can-i).
func (s *Server) createAccessReview(w http.ResponseWriter, r *http.Request, req request) {
	review := &authorizationv1.SelfSubjectAccessReview{}
	if !s.readReview(w, r, review) {
		return
	}
	review.Status = s.decide(review.Spec)
	s.writeReview(w, r, review)
}

// decide is the answer to one access review.
func (s *Server) decide(spec authorizationv1.SelfSubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	if nr := spec.NonResourceAttributes; nr != nil {
		if nr.Verb == verbGet && nonResourceServed(nr.Path) {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the API serves " + nr.Path}
		}
		return authorizationv1.SubjectAccessReviewStatus{Reason: fmt.Sprintf("staticlet does not serve %s %s", nr.Verb, nr.Path)}
	}
	ra := spec.ResourceAttributes
	if ra == nil {
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: "the review names neither a resource nor a path"}
	}
	name := ra.Resource
	if ra.Subresource != "" {
		name += "/" + ra.Subresource
	}
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
// namespace: every resource the API serves with its verbs, and the
// paths it may get.
func (s *Server) createRulesReview(w http.ResponseWriter, r *http.Request, req request) {
	review := &authorizationv1.SelfSubjectRulesReview{}
	if !s.readReview(w, r, review) {
		return
	}
	review.Status = authorizationv1.SubjectRulesReviewStatus{
		ResourceRules: s.resourceRules(),
		NonResourceRules: []authorizationv1.NonResourceRule{
			{Verbs: []string{verbGet}, NonResourceURLs: slices.Clone(nonResourcePaths)},
		},
	}
	s.writeReview(w, r, review)
}

// resourceRules are the served resources and subresources with their
// verbs, one rule each.
func (s *Server) resourceRules() []authorizationv1.ResourceRule {
	var out []authorizationv1.ResourceRule
	for _, res := range s.resources {
		group := []string{res.gv.Group}
		if v := res.verbs(); len(v) > 0 {
			out = append(out, authorizationv1.ResourceRule{Verbs: v, APIGroups: group, Resources: []string{res.name}})
		}
		for _, name := range sortedKeys(res.subresources) {
			sub := res.subresources[name]
			out = append(out, authorizationv1.ResourceRule{Verbs: slices.Clone(sub.verbs), APIGroups: group, Resources: []string{res.name + "/" + name}})
		}
	}
	return out
}
