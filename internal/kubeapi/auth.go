package kubeapi

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/staticlet/staticlet/internal/kubeapi/pki"
)

// The groups of users, as the apiserver names them.
const (
	// groupAuthenticated is every user who proved who they are; the
	// apiserver adds it to every authenticated user's groups.
	groupAuthenticated = "system:authenticated"
	// groupMasters is the administrators' group (kubeadm's admin.conf,
	// staticlet's admin certificate).
	groupMasters = pki.AdminGroup
	// groupViewers is the group of the viewer certificates `staticlet
	// kubeconfig --view` issues: they may read, not touch (authorize).
	groupViewers = pki.ViewerGroup
)

// maxReviewBytes bounds the body of a review a client sends.
const maxReviewBytes = 1 << 20

// userInfo is who made a request: the name and groups of the client
// certificate its connection verified, as the apiserver's x509
// authenticator reads them.
type userInfo struct {
	name   string
	groups []string
}

// requestUser is the user r's connection authenticated as: the subject
// of the first verified chain's leaf, its common name the user name and
// its organizations the groups, with system:authenticated added. It
// reports false when the connection verified no client certificate.
func requestUser(r *http.Request) (userInfo, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return userInfo{}, false
	}
	subject := r.TLS.VerifiedChains[0][0].Subject
	groups := slices.Clone(subject.Organization)
	if !slices.Contains(groups, groupAuthenticated) {
		groups = append(groups, groupAuthenticated)
	}
	return userInfo{name: subject.CommonName, groups: groups}, true
}

// reviewResources are the reviews a client creates to learn who it is
// and what it may do: kubectl auth whoami and auth can-i, and the
// action menus of k9s and Headlamp. Creating one changes nothing; they
// are the only objects the API creates.
func (s *Server) reviewResources() []*resource {
	return []*resource{
		{
			gv: authenticationv1.SchemeGroupVersion, name: "selfsubjectreviews", kind: "SelfSubjectReview",
			create: s.createSelfSubjectReview,
		},
		{
			gv: authorizationGV, name: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview",
			create: s.createAccessReview,
		},
		{
			gv: authorizationGV, name: "selfsubjectrulesreviews", kind: "SelfSubjectRulesReview",
			create: s.createRulesReview,
		},
	}
}

// createSelfSubjectReview answers who the client is (kubectl auth whoami).
func (s *Server) createSelfSubjectReview(w http.ResponseWriter, r *http.Request, req request) {
	review := &authenticationv1.SelfSubjectReview{}
	if !s.readReview(w, r, review) {
		return
	}
	u, _ := requestUser(r)
	review.Status.UserInfo = authenticationv1.UserInfo{Username: u.name, Groups: u.groups}
	s.writeReview(w, r, review)
}

// readReview decodes the review in r's body into into, in the media type
// its Content-Type names. On failure it has answered and reports false.
func (s *Server) readReview(w http.ResponseWriter, r *http.Request, into runtime.Object) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
	if err != nil {
		s.writeStatus(w, r, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("reading the review: %v", err)))
		return false
	}
	mt := mediaJSON
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ = mime.ParseMediaType(ct)
	}
	info, ok := runtime.SerializerInfoForMediaType(s.codecs.factory.SupportedMediaTypes(), mt)
	if !ok {
		s.writeStatus(w, r, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, verbCreate, schema.GroupResource{}, "",
			fmt.Sprintf("the body's media type %q is not one of %s, %s, %s", mt, mediaJSON, mediaYAML, mediaProtobuf), 0, false))
		return false
	}
	if _, _, err := info.Serializer.Decode(body, nil, into); err != nil {
		s.writeStatus(w, r, apierrors.NewBadRequest(fmt.Sprintf("decoding the review: %v", err)))
		return false
	}
	return true
}

// writeReview answers a created review, 201 Created, in the form the
// client's Accept header asks.
func (s *Server) writeReview(w http.ResponseWriter, r *http.Request, review runtime.Object) {
	t, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		s.writeStatus(w, r, notAcceptable(r.Header.Get("Accept")))
		return
	}
	if m, ok := review.(metav1.Object); ok {
		m.SetCreationTimestamp(metav1.Time{})
	}
	s.writeObject(w, r, http.StatusCreated, t, review)
}
