package spec

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// A pod's ConfigMaps and Secrets come resolved in pod.Pod.Objects (a
// reference missing there is to an object that does not exist). What the
// kubelet fetches from the apiserver to fill a volume or a variable is
// read from there, with the kubelet's rules for optional references and
// its messages for missing ones. No message quotes a value.

// configError is the error of a reference to a ConfigMap, a Secret or one
// of their keys that cannot be resolved: the container waits with the
// kubelet's CreateContainerConfigError until the object appears.
func configError(format string, args ...any) error {
	return &pod.WaitingError{Reason: "CreateContainerConfigError", Err: fmt.Errorf(format, args...)}
}

// objectNotFound is the kubelet's message for a missing object, as the
// apiserver words it: configmap "app" not found.
func objectNotFound(kind, name string) error {
	return configError("%s %q not found", strings.ToLower(kind), name)
}

// lookupObject returns the object of kind and name that p refers to, nil
// and no error when it is missing and optional, and a configError when it
// is missing and not optional.
func lookupObject(p *pod.Pod, kind, name string, optional *bool) (*pod.Object, error) {
	if o := p.Object(kind, name); o != nil {
		return o, nil
	}
	if isOptional(optional) {
		return nil, nil
	}
	return nil, objectNotFound(kind, name)
}

func isOptional(b *bool) bool { return b != nil && *b }

// VolumeFiles are the files of volume v of p, for the volume types whose
// content staticlet writes (configMap, secret, projected, downwardAPI), by
// their cleaned path in the volume, as the kubelet writes them; ok is
// false for any other type. An error naming a missing object or key is a
// pod.WaitingError (CreateContainerConfigError).
func VolumeFiles(p *pod.Pod, v *v1.Volume, node NodeFacts) (files map[string]VolumeFile, ok bool, err error) {
	switch {
	case v.ConfigMap != nil:
		files, err = objectFiles(p, pod.KindConfigMap, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, v.ConfigMap.Optional)
	case v.Secret != nil:
		files, err = objectFiles(p, pod.KindSecret, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, v.Secret.Optional)
	case v.Projected != nil:
		files, err = projectedFiles(p, v.Projected, node)
	case v.DownwardAPI != nil:
		files, err = DownwardAPIFiles(p, v.DownwardAPI, node)
	default:
		return nil, false, nil
	}
	return files, true, err
}

// VolumeOnTmpfs tells whether the kubelet keeps volume v's files in
// memory (a tmpfs), so that they never touch a disk: secret and projected
// volumes.
func VolumeOnTmpfs(v *v1.Volume) bool {
	return v.Secret != nil || v.Projected != nil
}

// objectFiles are the files a configMap or secret volume (or projected
// source) makes of an object, as the kubelet's MakePayload does: every
// key as a file of its name with defaultMode, or with items only the keys
// they name, at their path with their mode. A missing object is no files
// when optional; a key an item names that the object lacks is skipped
// when optional and an error otherwise.
func objectFiles(p *pod.Pod, kind, name string, items []v1.KeyToPath, defaultMode *int32, optional *bool) (map[string]VolumeFile, error) {
	mode := int32(v1.ConfigMapVolumeSourceDefaultMode) // the same for each type
	if defaultMode != nil {
		mode = *defaultMode
	}
	o, err := lookupObject(p, kind, name, optional)
	if err != nil || o == nil {
		return map[string]VolumeFile{}, err
	}
	out := make(map[string]VolumeFile)
	if len(items) == 0 {
		for _, k := range o.Keys() {
			data, _ := o.Value(k)
			out[k] = VolumeFile{Data: data, Mode: fileMode(mode)}
		}
		return out, nil
	}
	for _, it := range items {
		data, found := o.Value(it.Key)
		if !found {
			if isOptional(optional) {
				continue
			}
			if kind == pod.KindSecret {
				return nil, configError("references non-existent secret key: %s", it.Key)
			}
			return nil, configError("configmap references non-existent config key: %s", it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = *it.Mode
		}
		out[filepath.Clean(it.Path)] = VolumeFile{Data: data, Mode: fileMode(m)}
	}
	return out, nil
}

func fileMode(m int32) fs.FileMode { return fs.FileMode(m) & fs.ModePerm }

// projectedFiles merges the files of a projected volume's sources, each
// with the volume's defaultMode unless its item says otherwise, as the
// kubelet's projected volume does. Validation refuses the sources that
// need an apiserver (service account tokens and the like).
func projectedFiles(p *pod.Pod, pv *v1.ProjectedVolumeSource, node NodeFacts) (map[string]VolumeFile, error) {
	out := make(map[string]VolumeFile)
	for i, src := range pv.Sources {
		var (
			files map[string]VolumeFile
			err   error
		)
		switch {
		case src.ConfigMap != nil:
			files, err = objectFiles(p, pod.KindConfigMap, src.ConfigMap.Name, src.ConfigMap.Items, pv.DefaultMode, src.ConfigMap.Optional)
		case src.Secret != nil:
			files, err = objectFiles(p, pod.KindSecret, src.Secret.Name, src.Secret.Items, pv.DefaultMode, src.Secret.Optional)
		case src.DownwardAPI != nil:
			files, err = DownwardAPIFiles(p, &v1.DownwardAPIVolumeSource{Items: src.DownwardAPI.Items, DefaultMode: pv.DefaultMode}, node)
		default:
			err = fmt.Errorf("sources[%d]: unsupported projected source", i)
		}
		if err != nil {
			return nil, err
		}
		for path, f := range files {
			out[path] = f
		}
	}
	return out, nil
}

// envFromVars are the variables c's envFrom sources give, in order, as
// the kubelet makes them: every key of a ConfigMap's data (not its
// binaryData) or of a Secret, behind the source's prefix, a later source
// overriding an earlier one. A missing object is left out when optional
// and is an error otherwise.
func envFromVars(p *pod.Pod, c *v1.Container) ([]v1.EnvVar, error) {
	var out []v1.EnvVar
	for _, ef := range c.EnvFrom {
		var (
			o   *pod.Object
			err error
		)
		switch {
		case ef.ConfigMapRef != nil:
			o, err = lookupObject(p, pod.KindConfigMap, ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional)
		case ef.SecretRef != nil:
			o, err = lookupObject(p, pod.KindSecret, ef.SecretRef.Name, ef.SecretRef.Optional)
		}
		if err != nil {
			return nil, err
		}
		if o == nil {
			continue
		}
		for _, k := range o.Keys() {
			v, ok := envValue(o, k)
			if ok {
				out = append(out, v1.EnvVar{Name: ef.Prefix + k, Value: v})
			}
		}
	}
	return out, nil
}

// envValue is the value of key in o for a variable: a ConfigMap's data
// only, as the kubelet reads it, or a Secret's data.
func envValue(o *pod.Object, key string) (string, bool) {
	if o.Secret != nil {
		v, ok := o.Secret.Data[key]
		return string(v), ok
	}
	v, ok := o.ConfigMap.Data[key]
	return v, ok
}

// keyRefValue resolves a configMapKeyRef or secretKeyRef. ok is false for
// an optional reference to a missing object or key: the variable is left
// out.
func keyRefValue(p *pod.Pod, kind, name, key string, optional *bool) (value string, ok bool, err error) {
	o, err := lookupObject(p, kind, name, optional)
	if err != nil || o == nil {
		return "", false, err
	}
	if v, found := envValue(o, key); found {
		return v, true, nil
	}
	if isOptional(optional) {
		return "", false, nil
	}
	return "", false, configError("couldn't find key %s in %s %s/%s", key, kind, p.Namespace, name)
}
