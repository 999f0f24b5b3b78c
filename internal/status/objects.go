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
	"k8s.io/apimachinery/pkg/api/equality"
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

// objectSet is the ConfigMaps and Secrets in force, with their history.
// Guarded by Store.mu.
type objectSet struct {
	// list is in the order SetObjects was given it.
	list  []*pod.Object
	byKey map[pod.ObjectKey]sinceObject
	log   changeLog[sinceObject]
}

func newObjectSet(start uint64) objectSet {
	return objectSet{byKey: map[pod.ObjectKey]sinceObject{}, log: newChangeLog[sinceObject](start)}
}

// SetObjects replaces the ConfigMaps and Secrets in force with objs,
// which the store shares and never changes. An object keeps the time it
// was first set (its creationTimestamp, for AGE) while it stays. Each
// object added, changed (in content: the same object given again is no
// change) or gone gets the next revision, its resourceVersion, and goes
// into the objects' history.
func (s *Store) SetObjects(objs []*pod.Object) {
	now := time.Now()
	s.mu.Lock()
	old := s.objects.byKey
	byKey := make(map[pod.ObjectKey]sinceObject, len(objs))
	for _, o := range objs {
		k := o.Key()
		if _, dup := byKey[k]; dup {
			continue
		}
		prev, ok := old[k]
		switch {
		case !ok:
			prev = sinceObject{obj: o, since: now, rev: s.revs.bump()}
			s.objects.log.add(Change[sinceObject]{Rev: prev.rev, Type: WatchAdded, Object: prev})
			s.namespaceUsedLocked(k.Namespace, 1)
		case prev.obj != o && !equality.Semantic.DeepEqual(prev.obj, o):
			prev = sinceObject{obj: o, since: prev.since, rev: s.revs.bump()}
			s.objects.log.add(Change[sinceObject]{Rev: prev.rev, Type: WatchModified, Object: prev})
		default:
			prev.obj = o
		}
		byKey[k] = prev
	}
	for _, o := range s.objects.list {
		k := o.Key()
		if _, stays := byKey[k]; stays || o != old[k].obj {
			continue // kept, or a duplicate of the key in the list
		}
		gone := old[k]
		gone.rev = s.revs.bump()
		s.objects.log.add(Change[sinceObject]{Rev: gone.rev, Type: WatchDeleted, Object: gone})
		s.namespaceUsedLocked(k.Namespace, -1)
	}
	s.objects.list, s.objects.byKey = append([]*pod.Object(nil), objs...), byKey
	s.othersChangedLocked()
	s.mu.Unlock()
	s.notify()
}

// ConfigMaps returns the ConfigMaps in force, in namespace ns when it is
// not empty, sorted by namespace and name.
func (s *Store) ConfigMaps(ns string) []v1.ConfigMap {
	out, _ := s.ConfigMapsAt(ns)
	return out
}

// ConfigMapsAt is ConfigMaps with the store's revision they are the state
// at.
func (s *Store) ConfigMapsAt(ns string) ([]v1.ConfigMap, uint64) {
	return objectsAt(s, pod.KindConfigMap, ns, func(o sinceObject) v1.ConfigMap { return *o.configMap() })
}

// Secrets returns the Secrets in force, in namespace ns when it is not
// empty, sorted by namespace and name, without their data (see
// APISecret).
func (s *Store) Secrets(ns string) []v1.Secret {
	out, _ := s.SecretsAt(ns)
	return out
}

// SecretsAt is Secrets with the store's revision they are the state at.
func (s *Store) SecretsAt(ns string) ([]v1.Secret, uint64) {
	return objectsAt(s, pod.KindSecret, ns, func(o sinceObject) v1.Secret { return *o.secret() })
}

// ConfigMapChangesSince returns every change of a ConfigMap after revision
// rev, oldest first, or ErrRevisionGone when the store no longer has them
// all.
func (s *Store) ConfigMapChangesSince(rev uint64) ([]Change[*v1.ConfigMap], error) {
	return objectChangesSince(s, pod.KindConfigMap, rev, sinceObject.configMap)
}

// SecretChangesSince returns every change of a Secret after revision rev,
// oldest first, each Secret without its data (see APISecret), or
// ErrRevisionGone when the store no longer has them all.
func (s *Store) SecretChangesSince(rev uint64) ([]Change[*v1.Secret], error) {
	return objectChangesSince(s, pod.KindSecret, rev, sinceObject.secret)
}

// ConfigMap returns the ConfigMap ns/name, or nil.
func (s *Store) ConfigMap(ns, name string) *v1.ConfigMap {
	o, ok := s.object(pod.ObjectKey{Kind: pod.KindConfigMap, Namespace: ns, Name: name})
	if !ok {
		return nil
	}
	return o.configMap()
}

// Secret returns the Secret ns/name without its data (see APISecret), or
// nil. With a digestKey it carries AnnotationSecretDigests.
func (s *Store) Secret(ns, name string, digestKey []byte) *v1.Secret {
	o, ok := s.object(pod.ObjectKey{Kind: pod.KindSecret, Namespace: ns, Name: name})
	if !ok {
		return nil
	}
	sec := o.secret()
	if digestKey != nil {
		b, _ := json.Marshal(SecretDigests(o.obj, digestKey)) // a map of strings encodes
		sec.Annotations[AnnotationSecretDigests] = string(b)
	}
	return sec
}

// sinceObject is an object with the time it was first set and the
// revision of its latest change.
type sinceObject struct {
	obj   *pod.Object
	since time.Time
	rev   uint64
}

// configMap is o, a ConfigMap, as served (APIConfigMap), with its
// resourceVersion.
func (o sinceObject) configMap() *v1.ConfigMap {
	cm := APIConfigMap(o.obj, o.since)
	cm.ResourceVersion = strconv.FormatUint(o.rev, 10)
	return cm
}

// secret is o, a Secret, as served (APISecret), with its resourceVersion.
func (o sinceObject) secret() *v1.Secret {
	sec := APISecret(o.obj, o.since)
	sec.ResourceVersion = strconv.FormatUint(o.rev, 10)
	return sec
}

// object returns the object of key k.
func (s *Store) object(k pod.ObjectKey) (sinceObject, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects.byKey[k]
	return o, ok
}

// objectsAt returns the objects of kind in ns (any, when empty), in the
// order SetObjects was given them, each as conv makes it, and the
// store's revision.
func objectsAt[T any](s *Store, kind, ns string, conv func(sinceObject) T) ([]T, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []T{}
	for _, o := range s.objects.list {
		k := o.Key()
		if k.Kind != kind || (ns != "" && k.Namespace != ns) || s.objects.byKey[k].obj != o {
			continue
		}
		out = append(out, conv(s.objects.byKey[k]))
	}
	return out, s.revs.rev
}

// objectChangesSince returns the changes of the objects of kind after
// revision rev, each as conv makes it.
func objectChangesSince[T any](s *Store, kind string, rev uint64, conv func(sinceObject) T) ([]Change[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := changesSince(&s.objects.log, rev, s.revs.rev, func(c Change[sinceObject]) Change[sinceObject] { return c })
	if err != nil {
		return nil, err
	}
	var out []Change[T]
	for _, c := range all {
		if c.Object.obj.Kind() == kind {
			out = append(out, Change[T]{Rev: c.Rev, Type: c.Type, Object: conv(c.Object)})
		}
	}
	return out, nil
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
