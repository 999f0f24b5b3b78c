package kubeapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Authorization, as the apiserver's RBAC with its default roles and
// bindings: system:masters may do anything (the handlers then answer
// what staticlet does not serve); every authenticated user may get the
// discovery, version, health and OpenAPI paths and create the self
// reviews (system:discovery, system:public-info-viewer and
// system:basic-user); the viewer group may besides read what the view
// role lets a user read of what staticlet serves, and the node, the
// node's Lease and metrics. It comes before the handlers: a write a
// master is answered 405 is 403 for anyone else. The access reviews
// answer with the same function, so that kubectl auth can-i says what is
// enforced.

// readVerbs are the verbs that read: the view role's.
var readVerbs = []string{verbGet, verbList, verbWatch}

// attributes are what a request asks, as the apiserver's authorizer
// attributes: a resource request when req.resource is set, otherwise a
// non-resource request of path with verb (the method in lower case).
type attributes struct {
	user userInfo
	req  request
	path string
	verb string
}

// policyRule is one rule of a role, as RBAC's PolicyRule: verbs of
// resources (a subresource written "pods/log") in API groups, or verbs of
// non-resource paths, where a path ending in * matches every path that
// begins with the rest.
type policyRule struct {
	verbs     []string
	groups    []string
	resources []string
	paths     []string
}

// matches reports whether r allows what a asks.
func (r policyRule) matches(a attributes) bool {
	if !slices.Contains(r.verbs, a.verb) {
		return false
	}
	if a.req.resource == "" {
		return slices.ContainsFunc(r.paths, func(p string) bool {
			return p == a.path || strings.HasSuffix(p, "*") && strings.HasPrefix(a.path, strings.TrimSuffix(p, "*"))
		})
	}
	return slices.Contains(r.groups, a.req.group) && slices.Contains(r.resources, a.req.rbacResource())
}

// authenticatedRules are what every authenticated user may do: get the
// discovery, version, health and OpenAPI paths, and learn who it is and
// what it may do.
func authenticatedRules() []policyRule {
	return []policyRule{
		{verbs: []string{verbGet}, paths: nonResourcePaths},
		{verbs: []string{verbCreate}, groups: []string{authorizationGV.Group}, resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{verbs: []string{verbCreate}, groups: []string{authenticationv1.GroupName}, resources: []string{"selfsubjectreviews"}},
	}
}

// viewerRules are what the viewer group may read: of what staticlet
// serves, what the view role allows (pods, their logs, ConfigMaps,
// namespaces, events; not Secrets, exec, attach or port forwarding), and
// what a dashboard shows beside them: the node, its Lease and metrics.
func viewerRules() []policyRule {
	return []policyRule{
		{verbs: readVerbs, groups: []string{""}, resources: []string{"pods", "pods/log", "configmaps", "namespaces", "nodes"}},
		{verbs: readVerbs, groups: []string{"", eventsv1.GroupName}, resources: []string{"events"}},
		{verbs: readVerbs, groups: []string{coordinationv1.GroupName}, resources: []string{"leases"}},
		{verbs: readVerbs, groups: []string{metricsv1beta1.SchemeGroupVersion.Group}, resources: []string{"pods", "nodes"}},
	}
}

// authorize decides whether a's user may do what a asks; where not, the
// reason says why, for an access review.
func authorize(a attributes) (bool, string) {
	groups := a.user.groups
	if slices.Contains(groups, groupMasters) {
		return true, ""
	}
	var rules []policyRule
	if slices.Contains(groups, groupAuthenticated) {
		rules = append(rules, authenticatedRules()...)
	}
	if slices.Contains(groups, groupViewers) {
		rules = append(rules, viewerRules()...)
	}
	if slices.ContainsFunc(rules, func(r policyRule) bool { return r.matches(a) }) {
		return true, ""
	}
	if slices.Contains(groups, groupViewers) {
		return false, groupViewers + " may read what Kubernetes' view role reads, and the node, its Lease and metrics: no Secrets, exec, attach or port forwarding, and no writes"
	}
	return false, "only " + groupMasters + " and " + groupViewers + " are given more than discovery and the self reviews"
}

// requestAttributes are the attributes of r, made by user.
func requestAttributes(user userInfo, r *http.Request) attributes {
	req, ok := parseRequest(r)
	if !ok {
		return attributes{user: user, path: r.URL.Path, verb: strings.ToLower(r.Method)}
	}
	// The apiserver reads /api/v1/namespaces/NAME as in its own namespace.
	if req.resource == "namespaces" && req.namespace == "" {
		req.namespace = req.name
	}
	return attributes{user: user, req: req, verb: req.verb}
}

// authorizeRequests answers 403 to a request its user may not make, and
// passes the others to next.
func (s *Server) authorizeRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := requestUser(r)
		a := requestAttributes(user, r)
		if ok, _ := authorize(a); !ok {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			s.writeStatus(w, r, forbidden(a))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// forbiddenSanitizer keeps a denial's message from reading as HTML, as
// the apiserver's does.
var forbiddenSanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// forbidden is the apiserver's 403 for a denied request: `pods "web" is
// forbidden: User "u" cannot create resource "pods/exec" in API group ""
// in the namespace "default"`. RBAC gives no reason for a request no
// rule allows, so the message ends there.
func forbidden(a attributes) error {
	if a.req.resource == "" {
		msg := fmt.Sprintf("User %q cannot %s path %q", a.user.name, a.verb, a.path)
		return apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(forbiddenSanitizer.Replace(msg)))
	}
	res := a.req.rbacResource()
	scope := "at the cluster scope"
	if a.req.namespace != "" {
		scope = fmt.Sprintf("in the namespace %q", a.req.namespace)
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q %s", a.user.name, a.verb, res, a.req.group, scope)
	return apierrors.NewForbidden(schema.GroupResource{Group: a.req.group, Resource: a.req.resource}, a.req.name,
		errors.New(forbiddenSanitizer.Replace(msg)))
}
