package pod

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMaps and Secrets stand beside the pods in the manifest sources, as
// `podman kube play` takes them: documents of their own kind, in the same
// file as the pods that use them or in files of their own. A pod refers to
// them by name in its namespace, from volumes (configMap, secret,
// projected), env valueFrom and envFrom, as it would with an apiserver.
// The kubelet resolves those references at the apiserver; staticlet
// resolves them against the objects of every source (Resolve), and a pod
// holds what it found (Pod.Objects).

// The kinds of the objects pods refer to.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// ObjectKey names a ConfigMap or a Secret.
type ObjectKey struct {
	Kind      string // KindConfigMap or KindSecret
	Namespace string
	Name      string
}

// String returns the key as kubectl names objects: "configmap/default/app".
func (k ObjectKey) String() string {
	return strings.ToLower(k.Kind) + "/" + k.Namespace + "/" + k.Name
}

// Object is one ConfigMap or Secret as decoded from a manifest source:
// validated, with its namespace defaulted and a Secret's stringData
// folded into its data, as the apiserver stores them. Objects are never
// changed once decoded; pods and snapshots share them.
type Object struct {
	// Exactly one of ConfigMap and Secret is set.
	ConfigMap *v1.ConfigMap
	Secret    *v1.Secret
	// Source is the file path or URL the object was read from, and Line
	// the line of its document's start there (0 when unknown).
	Source string
	Line   int
	// Hash is a digest of what a pod sees of the object (its type and
	// data): a pod's ObjectsHash is made of these.
	Hash string
}

// Key returns the object's key.
func (o *Object) Key() ObjectKey {
	m := o.Meta()
	return ObjectKey{Kind: o.Kind(), Namespace: m.Namespace, Name: m.Name}
}

// Kind returns KindConfigMap or KindSecret.
func (o *Object) Kind() string {
	if o.Secret != nil {
		return KindSecret
	}
	return KindConfigMap
}

// Meta returns the object's metadata.
func (o *Object) Meta() *metav1.ObjectMeta {
	if o.Secret != nil {
		return &o.Secret.ObjectMeta
	}
	return &o.ConfigMap.ObjectMeta
}

// Immutable tells whether the object is marked immutable: an edit of its
// data is refused.
func (o *Object) Immutable() bool {
	var im *bool
	if o.Secret != nil {
		im = o.Secret.Immutable
	} else {
		im = o.ConfigMap.Immutable
	}
	return im != nil && *im
}

// Value returns the value of key, and whether the object has it: a
// ConfigMap's data or binaryData, a Secret's data.
func (o *Object) Value(key string) ([]byte, bool) {
	if o.Secret != nil {
		v, ok := o.Secret.Data[key]
		return v, ok
	}
	if v, ok := o.ConfigMap.Data[key]; ok {
		return []byte(v), true
	}
	v, ok := o.ConfigMap.BinaryData[key]
	return v, ok
}

// Keys returns the object's keys, sorted.
func (o *Object) Keys() []string {
	var keys []string
	if o.Secret != nil {
		keys = slices.Collect(maps.Keys(o.Secret.Data))
	} else {
		keys = append(slices.Collect(maps.Keys(o.ConfigMap.Data)), slices.Collect(maps.Keys(o.ConfigMap.BinaryData))...)
	}
	slices.Sort(keys)
	return keys
}

// Size returns the total size of the object's values in bytes.
func (o *Object) Size() int {
	n := 0
	for _, k := range o.Keys() {
		v, _ := o.Value(k)
		n += len(v)
	}
	return n
}

// objectHash digests what a pod sees of an object.
func objectHash(o *Object) string {
	h := sha256.New()
	if o.Secret != nil {
		fmt.Fprintf(h, "type:%s\n", o.Secret.Type)
	}
	for _, k := range o.Keys() {
		v, _ := o.Value(k)
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(v))
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ReadsFiles tells whether m's Secrets fill keys from files or
// credentials: its source must read it again to see their new values.
func (m *Manifest) ReadsFiles() bool {
	for _, o := range m.Objects {
		if o.Secret == nil {
			continue
		}
		if _, ok := o.Secret.Annotations[AnnotationSecretFiles]; ok {
			return true
		}
		if _, ok := o.Secret.Annotations[AnnotationSecretCredentials]; ok {
			return true
		}
	}
	return false
}

// ObjectRef is one reference of a pod to a ConfigMap or a Secret.
type ObjectRef struct {
	Kind string // KindConfigMap or KindSecret
	Name string
	// Optional is set when every reference of the pod to the object is
	// optional: the pod starts without it.
	Optional bool
}

// ObjectRefs returns the ConfigMaps and Secrets p refers to, from its
// volumes (projected sources included) and the env and envFrom of every
// container, sorted by kind and name. An object referred to more than
// once is optional only if every reference is.
func (p *Pod) ObjectRefs() []ObjectRef {
	refs := map[ObjectRef]bool{} // kind and name, optional unset -> optional
	add := func(kind, name string, optional *bool) {
		if name == "" {
			return
		}
		k := ObjectRef{Kind: kind, Name: name}
		opt := optional != nil && *optional
		if prev, seen := refs[k]; seen {
			opt = opt && prev
		}
		refs[k] = opt
	}
	for _, vol := range p.Spec.Volumes {
		switch {
		case vol.ConfigMap != nil:
			add(KindConfigMap, vol.ConfigMap.Name, vol.ConfigMap.Optional)
		case vol.Secret != nil:
			add(KindSecret, vol.Secret.SecretName, vol.Secret.Optional)
		case vol.Projected != nil:
			for _, s := range vol.Projected.Sources {
				if s.ConfigMap != nil {
					add(KindConfigMap, s.ConfigMap.Name, s.ConfigMap.Optional)
				}
				if s.Secret != nil {
					add(KindSecret, s.Secret.Name, s.Secret.Optional)
				}
			}
		}
	}
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					add(KindConfigMap, r.Name, r.Optional)
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					add(KindSecret, r.Name, r.Optional)
				}
			}
			for _, ef := range c.EnvFrom {
				if r := ef.ConfigMapRef; r != nil {
					add(KindConfigMap, r.Name, r.Optional)
				}
				if r := ef.SecretRef; r != nil {
					add(KindSecret, r.Name, r.Optional)
				}
			}
		}
	}
	out := make([]ObjectRef, 0, len(refs))
	for r, opt := range refs {
		r.Optional = opt
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b ObjectRef) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name)) })
	return out
}

// Resolve returns p with the objects it refers to, as find gives them
// (nil: missing), in Objects and their digest in ObjectsHash. p itself is
// not changed: the result is a copy sharing its v1.Pod.
func Resolve(p *Pod, find func(ObjectKey) *Object) *Pod {
	out := *p
	out.Objects, out.ObjectsHash = nil, ""
	refs := p.ObjectRefs()
	if len(refs) == 0 {
		return &out
	}
	out.Objects = make(map[ObjectKey]*Object, len(refs))
	h := sha256.New()
	for _, r := range refs {
		k := ObjectKey{Kind: r.Kind, Namespace: p.Namespace, Name: r.Name}
		o := find(k)
		if o == nil {
			fmt.Fprintf(h, "%s missing\n", k)
			continue
		}
		out.Objects[k] = o
		fmt.Fprintf(h, "%s %s\n", k, o.Hash)
	}
	out.ObjectsHash = hex.EncodeToString(h.Sum(nil))[:16]
	return &out
}

// Object returns the object of kind and name in p's namespace that p
// refers to, or nil when it is missing.
func (p *Pod) Object(kind, name string) *Object {
	return p.Objects[ObjectKey{Kind: kind, Namespace: p.Namespace, Name: name}]
}
