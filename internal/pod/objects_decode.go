package pod

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotations of a Secret that fill its keys from outside the manifest,
// so that the manifest directory holds no secret value (and may live in
// git): each is a comma-separated list of key=source.
const (
	// AnnotationSecretFiles fills keys from files of the node:
	// "tls.key=/etc/ssl/private/app.key".
	AnnotationSecretFiles = "staticlet.io/secret-files"
	// AnnotationSecretCredentials fills keys from systemd credentials, the
	// files of $CREDENTIALS_DIRECTORY that the unit's LoadCredential= and
	// LoadCredentialEncrypted= provide: "password=app-password".
	AnnotationSecretCredentials = "staticlet.io/secret-credentials"
)

// DataSource is where a key of a Secret is read from, as its annotations
// say.
type DataSource struct {
	// Credential is set for a systemd credential: Name is the credential's
	// name. Otherwise Name is an absolute file path.
	Credential bool
	Name       string
}

// String names the source for a message.
func (s DataSource) String() string {
	if s.Credential {
		return "credential " + s.Name
	}
	return s.Name
}

// decodeObject decodes a ConfigMap or Secret document strictly.
func decodeObject(dec *json.Decoder, kind string) (decodedPod, error) {
	if kind == KindSecret {
		var s v1.Secret
		if err := dec.Decode(&s); err != nil {
			return decodedPod{}, err
		}
		return decodedPod{obj: &Object{Secret: &s}}, nil
	}
	var cm v1.ConfigMap
	if err := dec.Decode(&cm); err != nil {
		return decodedPod{}, err
	}
	return decodedPod{obj: &Object{ConfigMap: &cm}}, nil
}

// prepareObject defaults and validates a decoded ConfigMap or Secret as
// the apiserver does, fills a Secret's keys that its annotations name (through
// opts.ReadData), and sets its source and hash. It returns nil and the
// problems when the object is invalid.
func prepareObject(o *Object, source string, opts Options) (*Object, []problem) {
	m := o.Meta()
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	v := &validator{}
	v.addErrs(apivalidation.ValidateObjectMeta(m, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	v.objectAnnotations(m.Annotations, o.Secret != nil)
	if o.Secret != nil {
		v.secret(o.Secret, opts)
	} else {
		v.configMap(o.ConfigMap)
	}
	if len(v.problems) > 0 {
		return nil, v.problems
	}
	o.Source, o.Hash = source, objectHash(o)
	return o, nil
}

// objectAnnotations checks staticlet's own annotations on an object.
func (v *validator) objectAnnotations(ann map[string]string, secret bool) {
	path := field.NewPath("metadata", "annotations")
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		if !strings.HasPrefix(k, ownAnnotationPrefix) {
			continue
		}
		switch {
		case !secret:
			v.add(path.Key(k), "unknown staticlet annotation on a ConfigMap; a Secret may have %s and %s", AnnotationSecretFiles, AnnotationSecretCredentials)
		case k != AnnotationSecretFiles && k != AnnotationSecretCredentials:
			v.add(path.Key(k), "unknown staticlet annotation; a Secret may have %s and %s", AnnotationSecretFiles, AnnotationSecretCredentials)
		}
	}
}

// maxObjectSize is the most a ConfigMap's or a Secret's values may hold
// together, as the apiserver allows.
const maxObjectSize = v1.MaxSecretSize

func (v *validator) configMap(cm *v1.ConfigMap) {
	size := 0
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		kp := field.NewPath("data").Key(k)
		v.check(kp, k, validation.IsConfigMapKey(k))
		if _, dup := cm.BinaryData[k]; dup {
			v.addErrs(field.Invalid(kp, k, "duplicate of key present in binaryData"))
		}
		size += len(cm.Data[k])
	}
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		kp := field.NewPath("binaryData").Key(k)
		v.check(kp, k, validation.IsConfigMapKey(k))
		if _, dup := cm.Data[k]; dup {
			v.addErrs(field.Invalid(kp, k, "duplicate of key present in data"))
		}
		size += len(cm.BinaryData[k])
	}
	if size > maxObjectSize {
		v.add(field.NewPath("data"), "the values of data and binaryData hold %d bytes together; a ConfigMap may hold at most %d", size, maxObjectSize)
	}
}

func (v *validator) secret(s *v1.Secret, opts Options) {
	dataPath := field.NewPath("data")
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		v.check(dataPath.Key(k), k, validation.IsConfigMapKey(k))
	}
	for _, k := range slices.Sorted(maps.Keys(s.StringData)) {
		v.check(field.NewPath("stringData").Key(k), k, validation.IsConfigMapKey(k))
	}
	// As the apiserver stores it: stringData written over data.
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, val := range s.StringData {
		s.Data[k] = []byte(val)
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
	v.fillSecret(s, opts)
	size := 0
	for _, val := range s.Data {
		size += len(val)
	}
	if size > maxObjectSize {
		v.add(dataPath, "the values hold %d bytes together; a Secret may hold at most %d", size, maxObjectSize)
	}
	v.secretType(s, dataPath)
}

// secretType checks the keys the Secret's type requires, as the apiserver
// does; no message shows a value.
func (v *validator) secretType(s *v1.Secret, dataPath *field.Path) {
	has := func(k string) bool { _, ok := s.Data[k]; return ok }
	switch s.Type {
	case v1.SecretTypeServiceAccountToken:
		if s.Annotations[v1.ServiceAccountNameKey] == "" {
			v.addErrs(field.Required(field.NewPath("metadata", "annotations").Key(v1.ServiceAccountNameKey), ""))
		}
	case v1.SecretTypeDockercfg, v1.SecretTypeDockerConfigJson:
		key := v1.DockerConfigKey
		if s.Type == v1.SecretTypeDockerConfigJson {
			key = v1.DockerConfigJsonKey
		}
		if !has(key) {
			v.addErrs(field.Required(dataPath.Key(key), ""))
		} else if json.Unmarshal(s.Data[key], &map[string]any{}) != nil {
			v.add(dataPath.Key(key), "must be a JSON object (value not shown)")
		}
	case v1.SecretTypeBasicAuth:
		if !has(v1.BasicAuthUsernameKey) && !has(v1.BasicAuthPasswordKey) {
			v.addErrs(field.Required(dataPath.Key(v1.BasicAuthUsernameKey), ""), field.Required(dataPath.Key(v1.BasicAuthPasswordKey), ""))
		}
	case v1.SecretTypeSSHAuth:
		if len(s.Data[v1.SSHAuthPrivateKey]) == 0 {
			v.addErrs(field.Required(dataPath.Key(v1.SSHAuthPrivateKey), ""))
		}
	case v1.SecretTypeTLS:
		for _, k := range []string{v1.TLSCertKey, v1.TLSPrivateKeyKey} {
			if !has(k) {
				v.addErrs(field.Required(dataPath.Key(k), ""))
			}
		}
	}
}

// fillSecret reads the keys s's annotations fill into its data. Without
// opts.ReadData (staticlet validate), the annotations are checked but
// nothing is read, and the keys are filled with nothing.
func (v *validator) fillSecret(s *v1.Secret, opts Options) {
	for _, ann := range []string{AnnotationSecretFiles, AnnotationSecretCredentials} {
		val, ok := s.Annotations[ann]
		if !ok {
			continue
		}
		ap := field.NewPath("metadata", "annotations").Key(ann)
		entries := splitList(val)
		if len(entries) == 0 {
			v.add(ap, "names no key: give key=source pairs, comma-separated")
		}
		for _, e := range entries {
			key, name, found := strings.Cut(e, "=")
			key, name = strings.TrimSpace(key), strings.TrimSpace(name)
			src := DataSource{Credential: ann == AnnotationSecretCredentials, Name: name}
			switch {
			case !found || key == "" || name == "":
				v.add(ap, "%q is not key=source", e)
				continue
			case len(validation.IsConfigMapKey(key)) > 0:
				v.add(ap, "%q is not a valid key: %s", key, strings.Join(validation.IsConfigMapKey(key), "; "))
				continue
			case !src.Credential && !filepath.IsAbs(name):
				v.add(ap, "key %s: %q is not an absolute path", key, name)
				continue
			case src.Credential && (strings.ContainsRune(name, '/') || name == "." || name == ".."):
				v.add(ap, "key %s: %q is not a credential name", key, name)
				continue
			}
			if _, dup := s.Data[key]; dup {
				v.add(ap, "key %s is also in data or stringData, or filled twice", key)
				continue
			}
			var data []byte
			if opts.ReadData != nil {
				var err error
				if data, err = opts.ReadData(src); err != nil {
					v.add(ap, "key %s: %v", key, err)
					continue
				}
			}
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[key] = data
		}
	}
}
