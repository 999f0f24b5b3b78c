package kubeapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWhoAmI: kubectl auth whoami's review names the certificate's user
// and groups.
func TestWhoAmI(t *testing.T) {
	api := newTestAPI(t, Config{})
	review, err := api.clientset(t).AuthenticationV1().SelfSubjectReviews().Create(context.Background(),
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.UserInfo
	if u.Username != "staticlet-admin" || !slices.Equal(u.Groups, []string{groupMasters, groupAuthenticated}) {
		t.Errorf("whoami = %+v, want staticlet-admin in system:masters and system:authenticated", u)
	}
}

// TestAccessReview: kubectl auth can-i's answers: yes to what the API
// serves, no with the reason to writes, no to what it does not serve.
func TestAccessReview(t *testing.T) {
	api := newTestAPI(t, Config{Stats: fakeStats})
	// A subresource as the exec and logs helpers add them.
	pods := api.srv.find(v1.SchemeGroupVersion, "pods")
	pods.subresources = map[string]subresource{"log": {kind: "Pod", verbs: []string{verbGet}}}
	reviews := api.clientset(t).AuthorizationV1().SelfSubjectAccessReviews()
	for _, tc := range []struct {
		name    string
		attrs   *authorizationv1.ResourceAttributes
		path    string
		verb    string
		allowed bool
		denied  bool
		reason  string
	}{
		{"get pods", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "default"}, "", "", true, false, ""},
		{"watch pods in every namespace", &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods"}, "", "", true, false, ""},
		{"list nodes", &authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes", Version: "v1"}, "", "", true, false, ""},
		{"get pods/log", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "log"}, "", "", true, false, ""},
		{"list podmetrics", &authorizationv1.ResourceAttributes{Verb: "list", Group: "metrics.k8s.io", Resource: "pods"}, "", "", true, false, ""},
		{"create an access review", &authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", "", true, false, ""},
		{"delete pods", &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods", Namespace: "default", Name: "web"}, "", "", false, true, readOnlyReason},
		{"patch nodes", &authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes"}, "", "", false, true, readOnlyReason},
		{"watch podmetrics", &authorizationv1.ResourceAttributes{Verb: "watch", Group: "metrics.k8s.io", Resource: "pods"}, "", "", false, true, "staticlet serves get, list of pods.metrics.k8s.io"},
		{"get deployments", &authorizationv1.ResourceAttributes{Verb: "get", Group: "apps", Resource: "deployments"}, "", "", false, false, "staticlet does not serve deployments.apps"},
		{"get /healthz", nil, "/healthz", "get", true, false, ""},
		{"get /apis/metrics.k8s.io/v1beta1", nil, "/apis/metrics.k8s.io/v1beta1", "get", true, false, ""},
		{"post /logs", nil, "/logs", "post", false, false, "staticlet does not serve post /logs"},
	} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: tc.attrs}}
		if tc.attrs == nil {
			review.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: tc.path, Verb: tc.verb}
		}
		got, err := reviews.Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		st := got.Status
		if st.Allowed != tc.allowed || st.Denied != tc.denied || (tc.reason != "" && st.Reason != tc.reason) {
			t.Errorf("%s: status = %+v, want allowed %t, denied %t, reason %q", tc.name, st, tc.allowed, tc.denied, tc.reason)
		}
	}
}

// TestRulesReview: the rules list every served resource with its verbs.
func TestRulesReview(t *testing.T) {
	api := newTestAPI(t, Config{Stats: fakeStats})
	review, err := api.clientset(t).AuthorizationV1().SelfSubjectRulesReviews().Create(context.Background(),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, r := range review.Status.ResourceRules {
		rules[qualified(r.APIGroups[0], r.Resources[0])] = strings.Join(r.Verbs, ",")
	}
	for res, verbs := range map[string]string{
		"pods": "get,list,watch", "nodes": "get,list,watch", "namespaces": "get,list,watch",
		"pods.metrics.k8s.io":                           "get,list",
		"selfsubjectaccessreviews.authorization.k8s.io": "create",
		"selfsubjectreviews.authentication.k8s.io":      "create",
	} {
		if rules[res] != verbs {
			t.Errorf("rules for %s = %q, want %q (all: %v)", res, rules[res], verbs, rules)
		}
	}
	if review.Status.Incomplete || len(review.Status.NonResourceRules) != 1 || !slices.Contains(review.Status.NonResourceRules[0].NonResourceURLs, "/version") {
		t.Errorf("rules review status = %+v", review.Status)
	}
}

// TestOtherPostsRefused: creating anything but a review is still 405,
// and a review that does not decode is 400.
func TestOtherPostsRefused(t *testing.T) {
	api := newTestAPI(t, Config{})
	cs := api.clientset(t)
	_, err := cs.CoreV1().Pods("default").Create(context.Background(), testPod("default", "x", "Running"), metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) {
		t.Errorf("create a pod: %v, want 405", err)
	}
	res := cs.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").
		SetHeader("Content-Type", "application/json").Body([]byte("{not json")).Do(context.Background())
	var code int
	res.StatusCode(&code)
	if code != http.StatusBadRequest {
		t.Errorf("a review that does not decode: %d, %v; want 400", code, res.Error())
	}
}
