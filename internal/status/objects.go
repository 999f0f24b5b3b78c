package status

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Annotations the status API adds to the ConfigMaps and Secrets it serves.
const (
	// AnnotationObjectSource is the manifest file (or URL) an object was
	// read from, with the line its document starts on: "path:line" (the
	// path alone when the line is unknown). Pods carry theirs in
	// kubernetes.io/config.source.
	AnnotationObjectSource = "staticlet.io/source"
	// AnnotationSecretKeys lists a served Secret's keys with the size of
	// each value in bytes, sorted by key: "tls.crt=1151,tls.key=1704". It
	// stands in for data, which the API never serves.
	AnnotationSecretKeys = "staticlet.io/keys"
	// AnnotationSecretDigests is set only on a Secret asked for with
	// digestKey (see SecretDigests): a JSON object of each key's
	// HMAC-SHA256 under that key, in hex.
	AnnotationSecretDigests = "staticlet.io/digests"
)

// lastApplied is the annotation kubectl apply leaves: on a Secret copied
// from a cluster it holds the data, so a served Secret never has it.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// objectSet is the ConfigMaps and Secrets in force, with the time each
// key was first set.
type objectSet struct {
	list  []*pod.Object
	since map[pod.ObjectKey]time.Time
}

// SetObjects replaces the ConfigMaps and Secrets in force with objs,
// which the store shares and never changes. An object keeps the time it
// was first set (its creationTimestamp, for AGE) while it stays.
func (s *Store) SetObjects(objs []*pod.Object) {
	now := time.Now()
	s.mu.Lock()
	since := make(map[pod.ObjectKey]time.Time, len(objs))
	for _, o := range objs {
		k := o.Key()
		t, ok := s.objects.since[k]
		if !ok {
			t = now
		}
		since[k] = t
	}
	s.objects = objectSet{list: append([]*pod.Object(nil), objs...), since: since}
	s.othersChangedLocked()
	s.mu.Unlock()
	s.notify()
}

// ConfigMaps returns the ConfigMaps in force, in namespace ns when it is
// not empty, sorted by namespace and name.
func (s *Store) ConfigMaps(ns string) []v1.ConfigMap {
	objs := s.objectsOf(pod.KindConfigMap, ns, "")
	out := make([]v1.ConfigMap, 0, len(objs))
	for _, o := range objs {
		out = append(out, *APIConfigMap(o.obj, o.since))
	}
	return out
}

// Secrets returns the Secrets in force, in namespace ns when it is not
// empty, sorted by namespace and name, without their data (see
// APISecret).
func (s *Store) Secrets(ns string) []v1.Secret {
	objs := s.objectsOf(pod.KindSecret, ns, "")
	out := make([]v1.Secret, 0, len(objs))
	for _, o := range objs {
		out = append(out, *APISecret(o.obj, o.since))
	}
	return out
}

// ConfigMap returns the ConfigMap ns/name, or nil.
func (s *Store) ConfigMap(ns, name string) *v1.ConfigMap {
	objs := s.objectsOf(pod.KindConfigMap, ns, name)
	if len(objs) == 0 {
		return nil
	}
	return APIConfigMap(objs[0].obj, objs[0].since)
}

// Secret returns the Secret ns/name without its data (see APISecret), or
// nil. With a digestKey it carries AnnotationSecretDigests.
func (s *Store) Secret(ns, name string, digestKey []byte) *v1.Secret {
	objs := s.objectsOf(pod.KindSecret, ns, name)
	if len(objs) == 0 {
		return nil
	}
	sec := APISecret(objs[0].obj, objs[0].since)
	if digestKey != nil {
		b, _ := json.Marshal(SecretDigests(objs[0].obj, digestKey)) // a map of strings encodes
		sec.Annotations[AnnotationSecretDigests] = string(b)
	}
	return sec
}

// sinceObject is an object with the time it was first set.
type sinceObject struct {
	obj   *pod.Object
	since time.Time
}

// objectsOf returns the objects of kind in ns and of name (any, when
// empty), in the order SetObjects was given them.
func (s *Store) objectsOf(kind, ns, name string) []sinceObject {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sinceObject
	for _, o := range s.objects.list {
		k := o.Key()
		if k.Kind != kind || (ns != "" && k.Namespace != ns) || (name != "" && k.Name != name) {
			continue
		}
		out = append(out, sinceObject{obj: o, since: s.objects.since[k]})
	}
	return out
}

// APIConfigMap returns o, a ConfigMap, as the status API serves it: a
// copy with apiVersion and kind, creationTimestamp since, and its source
// in AnnotationObjectSource.
func APIConfigMap(o *pod.Object, since time.Time) *v1.ConfigMap {
	cm := o.ConfigMap.DeepCopy()
	cm.APIVersion, cm.Kind = "v1", pod.KindConfigMap
	cm.CreationTimestamp = metav1.NewTime(since)
	cm.Annotations = withAnnotation(cm.Annotations, AnnotationObjectSource, objectSource(o))
	return cm
}

// APISecret returns o, a Secret, as the status API serves it: its
// metadata, type and immutable, with apiVersion and kind,
// creationTimestamp since, its source in AnnotationObjectSource and its
// keys with their sizes in AnnotationSecretKeys. Data and stringData are
// always left out, and so is kubectl's last-applied-configuration
// annotation, which may hold them.
func APISecret(o *pod.Object, since time.Time) *v1.Secret {
	src := o.Secret
	sec := &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: pod.KindSecret},
		ObjectMeta: *src.ObjectMeta.DeepCopy(),
		Type:       src.Type,
	}
	if src.Immutable != nil {
		im := *src.Immutable
		sec.Immutable = &im
	}
	delete(sec.Annotations, lastApplied)
	sec.CreationTimestamp = metav1.NewTime(since)
	sec.Annotations = withAnnotation(sec.Annotations, AnnotationObjectSource, objectSource(o))
	sec.Annotations[AnnotationSecretKeys] = FormatKeySizes(o)
	return sec
}

// FormatKeySizes is AnnotationSecretKeys' value for o.
func FormatKeySizes(o *pod.Object) string {
	var b strings.Builder
	for i, k := range o.Keys() {
		v, _ := o.Value(k)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", k, len(v))
	}
	return b.String()
}

// KeySizes parses AnnotationSecretKeys' value: each key with its size in
// bytes. Keys cannot hold ',' or '=', so the list is unambiguous.
func KeySizes(ann string) (map[string]int, error) {
	out := map[string]int{}
	if ann == "" {
		return out, nil
	}
	for _, e := range strings.Split(ann, ",") {
		k, n, ok := strings.Cut(e, "=")
		size, err := strconv.Atoi(n)
		if !ok || err != nil {
			return nil, fmt.Errorf("parsing %s: %q is not key=size", AnnotationSecretKeys, e)
		}
		out[k] = size
	}
	return out, nil
}

// SecretDigests returns each key of o with the HMAC-SHA256 of its value
// under digestKey, in hex: what lets staticlet diff tell a changed value
// from an unchanged one without the value. The caller picks a fresh
// random key each time, so a digest means nothing after its run and
// cannot be looked up in a table of digests of common values.
func SecretDigests(o *pod.Object, digestKey []byte) map[string]string {
	out := map[string]string{}
	for _, k := range o.Keys() {
		v, _ := o.Value(k)
		m := hmac.New(sha256.New, digestKey)
		m.Write(v)
		out[k] = hex.EncodeToString(m.Sum(nil))
	}
	return out
}

// objectSource is AnnotationObjectSource's value for o.
func objectSource(o *pod.Object) string {
	if o.Line > 0 {
		return o.Source + ":" + strconv.Itoa(o.Line)
	}
	return o.Source
}

// withAnnotation returns ann with k set to v, allocating it if nil.
func withAnnotation(ann map[string]string, k, v string) map[string]string {
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	return ann
}

// configMaps serves GET /configmaps?namespace=: a ConfigMapList.
func (s *Server) configMaps(w http.ResponseWriter, r *http.Request) {
	list := v1.ConfigMapList{Items: s.cfg.Store.ConfigMaps(r.URL.Query().Get("namespace"))}
	list.APIVersion, list.Kind = "v1", "ConfigMapList"
	s.writeJSON(w, r, http.StatusOK, &list)
}

// secrets serves GET /secrets?namespace=: a SecretList, without data.
func (s *Server) secrets(w http.ResponseWriter, r *http.Request) {
	list := v1.SecretList{Items: s.cfg.Store.Secrets(r.URL.Query().Get("namespace"))}
	list.APIVersion, list.Kind = "v1", "SecretList"
	s.writeJSON(w, r, http.StatusOK, &list)
}

func (s *Server) configMap(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if cm := s.cfg.Store.ConfigMap(ns, name); cm != nil {
		s.writeJSON(w, r, http.StatusOK, cm)
		return
	}
	s.writeError(w, r, http.StatusNotFound, "configmap %q not found in namespace %q", name, ns)
}

// secret serves GET /secrets/{namespace}/{name}?digestKey=HEX: the
// Secret without data, with its keys' digests when a digestKey (16 to 64
// bytes, in hex) is given.
func (s *Server) secret(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var digestKey []byte
	if h := r.URL.Query().Get("digestKey"); h != "" {
		var err error
		if digestKey, err = hex.DecodeString(h); err != nil || len(digestKey) < minDigestKey || len(digestKey) > maxDigestKey {
			s.writeError(w, r, http.StatusBadRequest, "invalid digestKey: want %d to %d bytes in hex", minDigestKey, maxDigestKey)
			return
		}
	}
	if sec := s.cfg.Store.Secret(ns, name, digestKey); sec != nil {
		s.writeJSON(w, r, http.StatusOK, sec)
		return
	}
	s.writeError(w, r, http.StatusNotFound, "secret %q not found in namespace %q", name, ns)
}

// The bounds of a digestKey: short keys would let a caller look digests
// up in a table made in advance.
const (
	minDigestKey = 16
	maxDigestKey = 64
)
