package kubeapi

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/staticlet/staticlet/internal/kubeapi/pki"
	"github.com/staticlet/staticlet/internal/status"
)

// TestAuthorize: the decision, by the user's groups, the verb and what is
// asked, as RBAC's default roles and bindings with the view role bound to
// the viewer group decide.
func TestAuthorize(t *testing.T) {
	admin := userInfo{name: pki.AdminUser, groups: []string{groupMasters, groupAuthenticated}}
	viewer := userInfo{name: pki.ViewerUser, groups: []string{groupViewers, groupAuthenticated}}
	other := userInfo{name: "someone", groups: []string{"acme", groupAuthenticated}}
	res := func(verb, group, resource, sub string) attributes {
		return attributes{verb: verb, req: request{group: group, version: "v1", namespace: "default", resource: resource, subresource: sub, verb: verb}}
	}
	path := func(verb, p string) attributes { return attributes{verb: verb, path: p} }
	for _, tc := range []struct {
		a                      attributes
		admin, viewer, another bool
	}{
		{res("get", "", "pods", ""), true, true, false},
		{res("list", "", "pods", ""), true, true, false},
		{res("watch", "", "pods", ""), true, true, false},
		{res("get", "", "pods", "log"), true, true, false},
		{res("create", "", "pods", "exec"), true, false, false},
		{res("get", "", "pods", "exec"), true, false, false},
		{res("create", "", "pods", "attach"), true, false, false},
		{res("create", "", "pods", "portforward"), true, false, false},
		{res("get", "", "pods", "status"), true, false, false},
		{res("delete", "", "pods", ""), true, false, false},
		{res("create", "", "pods", ""), true, false, false},
		{res("patch", "", "nodes", ""), true, false, false},
		{res("list", "", "nodes", ""), true, true, false},
		{res("watch", "", "namespaces", ""), true, true, false},
		{res("list", "", "configmaps", ""), true, true, false},
		{res("get", "", "secrets", ""), true, false, false},
		{res("list", "", "secrets", ""), true, false, false},
		{res("watch", "", "secrets", ""), true, false, false},
		{res("list", "", "events", ""), true, true, false},
		{res("watch", "events.k8s.io", "events", ""), true, true, false},
		{res("get", "coordination.k8s.io", "leases", ""), true, true, false},
		{res("list", "metrics.k8s.io", "pods", ""), true, true, false},
		{res("get", "metrics.k8s.io", "nodes", ""), true, true, false},
		{res("list", "apps", "deployments", ""), true, false, false},
		{res("get", "apps", "pods", ""), true, false, false},
		{res("create", "authorization.k8s.io", "selfsubjectaccessreviews", ""), true, true, true},
		{res("create", "authorization.k8s.io", "selfsubjectrulesreviews", ""), true, true, true},
		{res("create", "authentication.k8s.io", "selfsubjectreviews", ""), true, true, true},
		{res("create", "authorization.k8s.io", "subjectaccessreviews", ""), true, false, false},
		{res("list", "authorization.k8s.io", "selfsubjectaccessreviews", ""), true, false, false},
		{path("get", "/api"), true, true, true},
		{path("get", "/apis/metrics.k8s.io/v1beta1"), true, true, true},
		{path("get", "/openapi/v3"), true, true, true},
		{path("get", "/openapi/v2"), true, true, true},
		{path("get", "/version"), true, true, true},
		{path("get", "/healthz"), true, true, true},
		{path("get", "/livez"), true, true, true},
		{path("get", "/readyz"), true, true, true},
		{path("post", "/healthz"), true, false, false},
		{path("head", "/healthz"), true, false, false},
		{path("get", "/metrics"), true, false, false},
		{path("get", "/"), true, false, false},
		{path("get", "/apisx"), true, false, false},
	} {
		for _, c := range []struct {
			user userInfo
			want bool
		}{{admin, tc.admin}, {viewer, tc.viewer}, {other, tc.another}} {
			a := tc.a
			a.user = c.user
			ok, reason := authorize(a)
			if ok != c.want || ok != (reason == "") {
				t.Errorf("authorize(%s %s %s/%s %s) for %v = %t, %q; want %t", a.verb, a.req.group, a.req.resource, a.req.subresource, a.path, c.user.groups, ok, reason, c.want)
			}
		}
	}
}

// TestForbiddenMessage: the 403's message as the apiserver words it.
func TestForbiddenMessage(t *testing.T) {
	u := userInfo{name: "dash", groups: []string{groupViewers}}
	for _, tc := range []struct {
		a    attributes
		want string
	}{
		{attributes{user: u, verb: "create", req: request{namespace: "default", resource: "pods", name: "web", subresource: "exec", verb: "create"}},
			`pods "web" is forbidden: User "dash" cannot create resource "pods/exec" in API group "" in the namespace "default"`},
		{attributes{user: u, verb: "list", req: request{group: "apps", resource: "deployments", verb: "list"}},
			`deployments.apps is forbidden: User "dash" cannot list resource "deployments" in API group "apps" at the cluster scope`},
		{attributes{user: u, verb: "get", path: "/metrics"},
			`forbidden: User "dash" cannot get path "/metrics"`},
		{attributes{user: u, verb: "get", req: request{namespace: "a<b", resource: "secrets", name: "x", verb: "get"}},
			`secrets "x" is forbidden: User "dash" cannot get resource "secrets" in API group "" in the namespace "a&lt;b"`},
	} {
		err := forbidden(tc.a)
		if !apierrors.IsForbidden(err) || err.Error() != tc.want {
			t.Errorf("forbidden = %v, want 403 %q", err, tc.want)
		}
	}
}

// pkiAPI is a Server under test with the node's certificates as package
// pki makes them, whose CA issues the clients' certificates.
type pkiAPI struct {
	store *status.Store
	url   string
	dir   string
	admin *rest.Config
}

// newPKIAPI serves New(cfg) over TLS with the certificates pki.Ensure
// makes in a temporary directory, as staticlet run does.
func newPKIAPI(t *testing.T, cfg Config) *pkiAPI {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = status.NewStore()
	}
	cfg.NodeName = "node1"
	dir := filepath.Join(t.TempDir(), "api")
	b, err := pki.Ensure(dir, pki.Options{Hostname: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(New(cfg).Handler())
	ts.TLS = b.ServerConfig()
	// A client asks for 127.0.0.1 without a server name, where the
	// config's certificates answer instead of GetCertificate.
	ts.TLS.Certificates = []tls.Certificate{*b.Certificate()}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	c := b.Client()
	return &pkiAPI{store: cfg.Store, url: ts.URL, dir: dir,
		admin: &rest.Config{Host: ts.URL, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM, CertData: c.CertPEM, KeyData: c.KeyPEM}}}
}

// as is a client-go config with a certificate for user of groups, issued
// by pki.IssueClient from the API's CA.
func (a *pkiAPI) as(t *testing.T, user string, groups ...string) *rest.Config {
	t.Helper()
	c, err := pki.IssueClient(a.dir, user, groups, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: a.url, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM, CertData: c.CertPEM, KeyData: c.KeyPEM}}
}

func clientsetFor(t *testing.T, c *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestViewer: a viewer's certificate reads pods and their kin, and is
// refused Secrets, exec and writes with the apiserver's 403; the reviews
// say the same.
func TestViewer(t *testing.T) {
	if pki.ViewerGroup != groupViewers || pki.AdminGroup != groupMasters {
		t.Fatalf("pki's groups %q, %q differ from the authorizer's %q, %q", pki.ViewerGroup, pki.AdminGroup, groupViewers, groupMasters)
	}
	api := newPKIAPI(t, Config{Stats: fakeStats})
	api.store.SetPod(testPod("default", "web", "Running"))
	ctx := context.Background()
	cs := clientsetFor(t, api.as(t, "dash", pki.ViewerGroup))

	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("list pods as a viewer = %v, %v; want the pod", pods, err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{}); err != nil {
		t.Errorf("get the node as a viewer: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list configmaps as a viewer: %v", err)
	}
	_, err = cs.CoreV1().Secrets("default").Get(ctx, "db", metav1.GetOptions{})
	if want := `secrets "db" is forbidden: User "dash" cannot get resource "secrets" in API group "" in the namespace "default"`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("get a secret as a viewer: %v, want 403 %q", err, want)
	}
	err = cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("web").SubResource("exec").
		Param("command", "sh").Param("stdout", "true").Do(ctx).Error()
	if want := `pods "web" is forbidden: User "dash" cannot create resource "pods/exec" in API group "" in the namespace "default"`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("exec as a viewer: %v, want 403 %q", err, want)
	}
	// A write is refused before the handler that answers masters 405.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete a pod as a viewer: %v, want 403", err)
	}
	if err := clientsetFor(t, api.admin).CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("delete a pod as the admin: %v, want 405", err)
	}

	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "dash" || !slices.Equal(who.Status.UserInfo.Groups, []string{groupViewers, groupAuthenticated}) {
		t.Errorf("whoami as a viewer = %+v, %v", who, err)
	}
	ssar := func(ra authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	if st := ssar(authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "default"}); st.Allowed || !strings.Contains(st.Reason, "no Secrets") {
		t.Errorf("can-i get secrets as a viewer = %+v, want no with the reason", st)
	}
	if st := ssar(authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "default"}); st.Allowed {
		t.Errorf("can-i create pods/exec as a viewer = %+v, want no", st)
	}
	if st := ssar(authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods"}); !st.Allowed {
		t.Errorf("can-i watch pods as a viewer = %+v, want yes", st)
	}

	rr, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, r := range rr.Status.ResourceRules {
		rules = append(rules, qualified(r.APIGroups[0], r.Resources[0])+" "+strings.Join(r.Verbs, ","))
	}
	slices.Sort(rules)
	want := []string{
		"configmaps get,list,watch", "events get,list,watch", "events.events.k8s.io get,list,watch",
		"leases.coordination.k8s.io get,list,watch", "namespaces get,list,watch", "nodes get,list,watch",
		"pods get,list,watch", "pods.metrics.k8s.io get,list",
		"selfsubjectaccessreviews.authorization.k8s.io create", "selfsubjectreviews.authentication.k8s.io create",
		"selfsubjectrulesreviews.authorization.k8s.io create",
	}
	if !slices.Equal(rules, want) {
		t.Errorf("a viewer's rules =\n%s\nwant\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
	}
	if n := rr.Status.NonResourceRules; len(n) != 1 || !slices.Equal(n[0].NonResourceURLs, nonResourcePaths) {
		t.Errorf("a viewer's non-resource rules = %+v, want get of %v", n, nonResourcePaths)
	}
}

// TestOtherCertificate: a certificate of the CA in neither the masters'
// nor the viewers' group gets discovery, health and the self reviews
// only, as system:authenticated in a cluster.
func TestOtherCertificate(t *testing.T) {
	api := newPKIAPI(t, Config{})
	api.store.SetPod(testPod("default", "web", "Running"))
	ctx := context.Background()
	cs := clientsetFor(t, api.as(t, "someone", "acme"))

	if _, _, err := cs.Discovery().ServerGroupsAndResources(); err != nil {
		t.Errorf("discovery as another certificate: %v", err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Errorf("version as another certificate: %v", err)
	}
	if body, err := cs.Discovery().RESTClient().Get().AbsPath("/healthz").DoRaw(ctx); err != nil || string(body) != "ok" {
		t.Errorf("healthz as another certificate = %q, %v", body, err)
	}
	_, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if want := `pods is forbidden: User "someone" cannot list resource "pods" in API group "" at the cluster scope`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("list pods as another certificate: %v, want 403 %q", err, want)
	}
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "someone" {
		t.Errorf("whoami as another certificate = %+v, %v", who, err)
	}
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}}}, metav1.CreateOptions{})
	if err != nil || r.Status.Allowed || !strings.Contains(r.Status.Reason, groupViewers) {
		t.Errorf("can-i list pods as another certificate = %+v, %v; want no with the reason", r, err)
	}
	rr, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{}, metav1.CreateOptions{})
	if err != nil || len(rr.Status.ResourceRules) != 3 {
		t.Errorf("another certificate's rules = %+v, %v; want the three self reviews", rr, err)
	}
}
