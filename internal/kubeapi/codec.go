package kubeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/munnerz/goautoneg"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// The media types the API speaks.
const (
	mediaJSON     = runtime.ContentTypeJSON
	mediaYAML     = runtime.ContentTypeYAML
	mediaProtobuf = runtime.ContentTypeProtobuf
)

// The alternative forms a client may ask for with the "as" parameter of
// its Accept header.
const (
	asTable           = "Table"
	asPartial         = "PartialObjectMetadata"
	asPartialList     = "PartialObjectMetadataList"
	asGroupDiscovery  = "APIGroupDiscoveryList"
	groupMeta         = "meta.k8s.io"
	groupAPIDiscovery = "apidiscovery.k8s.io"
)

// codecs are the scheme of the types the API serves and their
// serializers.
type codecs struct {
	scheme  *runtime.Scheme
	factory serializer.CodecFactory
}

func newCodecs() codecs {
	scheme := runtime.NewScheme()
	must(v1.AddToScheme(scheme))
	must(eventsv1.AddToScheme(scheme))
	must(coordinationv1.AddToScheme(scheme))
	must(metav1.AddMetaToScheme(scheme))
	must(apidiscoveryv2.AddToScheme(scheme))
	must(metricsv1beta1.AddToScheme(scheme))
	must(authorizationv1.AddToScheme(scheme))
	must(authenticationv1.AddToScheme(scheme))
	metav1.AddToGroupVersion(scheme, v1.SchemeGroupVersion)
	scheme.AddUnversionedTypes(metav1.Unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
	return codecs{scheme: scheme, factory: serializer.NewCodecFactory(scheme)}
}

// must panics on an error registering the built-in types, which only a
// programming error causes.
func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("registering API types: %v", err))
	}
}

// target is what a client's Accept header asked for: a media type, and
// maybe another form of the object ("as") of a group and version.
type target struct {
	mediaType string
	as        string
	group     string
	version   string
}

// negotiate picks the first form in accept that the server can give;
// forms lists the "as" values it can give for this request besides the
// object itself ("" stands for the object). An empty Accept header, or
// */*, is JSON.
func negotiate(accept string, forms ...string) (target, bool) {
	if strings.TrimSpace(accept) == "" {
		return target{mediaType: mediaJSON}, true
	}
	for _, a := range goautoneg.ParseAccept(accept) {
		mt := a.Type + "/" + a.SubType
		switch mt {
		case "*/*", "application/*":
			mt = mediaJSON
		case mediaJSON, mediaYAML, mediaProtobuf:
		default:
			continue
		}
		t := target{mediaType: mt, as: a.Params["as"], group: a.Params["g"], version: a.Params["v"]}
		if acceptable(t, forms) {
			return t, true
		}
	}
	return target{}, false
}

// acceptable reports whether the server can give t, one of forms.
func acceptable(t target, forms []string) bool {
	if t.as == "" {
		return true
	}
	if !containsString(forms, t.as) {
		return false
	}
	switch t.as {
	case asGroupDiscovery:
		return t.group == groupAPIDiscovery && t.version == "v2" && t.mediaType != mediaYAML
	default:
		return t.group == groupMeta && (t.version == "v1" || t.version == "v1beta1")
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// typed sets obj's apiVersion and kind from the scheme, as the apiserver
// sends every object.
func (c codecs) typed(obj runtime.Object) runtime.Object {
	if !obj.GetObjectKind().GroupVersionKind().Empty() {
		return obj
	}
	if gvks, _, err := c.scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return obj
}

// encode serializes obj in mediaType.
func (c codecs) encode(mediaType string, obj runtime.Object) ([]byte, error) {
	info, ok := runtime.SerializerInfoForMediaType(c.factory.SupportedMediaTypes(), mediaType)
	if !ok {
		return nil, fmt.Errorf("no serializer for %s", mediaType)
	}
	var b bytes.Buffer
	if err := info.Serializer.Encode(c.typed(obj), &b); err != nil {
		return nil, fmt.Errorf("encoding %T as %s: %w", obj, mediaType, err)
	}
	return b.Bytes(), nil
}

// writeObject writes obj with code in the media type t names; a type
// protobuf cannot carry goes as JSON.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, t target, obj runtime.Object) {
	mt := t.mediaType
	b, err := s.codecs.encode(mt, obj)
	if err != nil && mt == mediaProtobuf {
		mt = mediaJSON
		b, err = s.codecs.encode(mt, obj)
	}
	if err != nil {
		s.log.Error("encoding API response", "path", r.URL.Path, "err", err)
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(code)
	w.Write(b)
}

// writeJSON writes v, which is no API object, as JSON.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// writeStatus writes err as the apiserver does: a Status with its code,
// reason and message, as JSON.
func (s *Server) writeStatus(w http.ResponseWriter, r *http.Request, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.APIVersion, status.Kind = "v1", "Status"
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	s.writeObject(w, r, code, target{mediaType: mediaJSON}, &status)
}

func unauthorized() error {
	return apierrors.NewUnauthorized("Unauthorized")
}

func notFound(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound, Message: msg,
	}}
}

func notAcceptable(accept string) error {
	return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", schema.GroupResource{}, "",
		fmt.Sprintf("only the following media types are accepted: %s, %s, %s (asked for %q)",
			mediaJSON, mediaYAML, mediaProtobuf, accept), 0, false)
}
