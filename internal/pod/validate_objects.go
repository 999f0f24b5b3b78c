package pod

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks here follow the apiserver's for what a pod says of the
// ConfigMaps and Secrets it uses: volumes of either, projected volumes,
// env valueFrom and envFrom.

// fileMode checks a volume file's mode.
func (v *validator) fileMode(mode *int32, p *field.Path) {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		v.addErrs(field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive"))
	}
}

// objectVolume checks a configMap or secret volume, whose object's name
// is at namePath.
func (v *validator) objectVolume(name string, namePath *field.Path, mode *int32, items []v1.KeyToPath, p *field.Path) {
	if name == "" {
		v.addErrs(field.Required(namePath, ""))
	}
	v.fileMode(mode, p.Child("defaultMode"))
	v.keyToPaths(items, p.Child("items"), nil)
}

// keyToPaths checks the items of a configMap or secret volume or
// projected source; paths, when not nil, holds the paths of the projected
// volume's other files, and gets these.
func (v *validator) keyToPaths(items []v1.KeyToPath, p *field.Path, paths sets.Set[string]) {
	for i, kp := range items {
		ip := p.Index(i)
		if kp.Key == "" {
			v.addErrs(field.Required(ip.Child("key"), ""))
		}
		v.relativePath(kp.Path, ip.Child("path"), true)
		if strings.HasPrefix(kp.Path, "..") && !strings.HasPrefix(kp.Path, "../") {
			v.addErrs(field.Invalid(ip.Child("path"), kp.Path, "must not start with '..'"))
		}
		v.fileMode(kp.Mode, ip.Child("mode"))
		v.uniquePath(paths, kp.Path, p.Index(i))
	}
}

// uniquePath records path in paths (nil: not a projected volume) and
// tells when another source of the projected volume has it already.
func (v *validator) uniquePath(paths sets.Set[string], path string, p *field.Path) {
	if paths == nil || path == "" {
		return
	}
	if paths.Has(path) {
		v.addErrs(field.Invalid(p, path, "conflicting duplicate paths"))
	}
	paths.Insert(path)
}

// projected checks a projected volume's sources: each one of configMap,
// secret or downwardAPI, their paths unique across them. Service account
// tokens and the other sources need an apiserver.
func (v *validator) projected(pv *v1.ProjectedVolumeSource, p *field.Path) {
	paths := sets.New[string]()
	for i, src := range pv.Sources {
		sp := p.Child("sources").Index(i)
		n := 0
		if s := src.ConfigMap; s != nil {
			n++
			if s.Name == "" {
				v.addErrs(field.Required(sp.Child("configMap", "name"), ""))
			}
			v.keyToPaths(s.Items, sp.Child("configMap", "items"), paths)
		}
		if s := src.Secret; s != nil {
			n++
			if s.Name == "" {
				v.addErrs(field.Required(sp.Child("secret", "name"), ""))
			}
			v.keyToPaths(s.Items, sp.Child("secret", "items"), paths)
		}
		if s := src.DownwardAPI; s != nil {
			n++
			v.downwardAPIFiles(s.Items, sp.Child("downwardAPI"), paths)
		}
		if src.ServiceAccountToken != nil {
			n++
			v.add(sp.Child("serviceAccountToken"), "service account tokens are issued by an apiserver; %s — put the token in a Secret", noAPIServer)
		}
		if src.ClusterTrustBundle != nil {
			n++
			v.add(sp.Child("clusterTrustBundle"), "cluster trust bundles are kept by an apiserver; %s — put the bundle in a ConfigMap", noAPIServer)
		}
		if src.PodCertificate != nil {
			n++
			v.add(sp.Child("podCertificate"), "pod certificates are issued through an apiserver; %s — put the certificate in a Secret", noAPIServer)
		}
		if n > 1 {
			v.addErrs(field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
}

// keySelector checks an env var's configMapKeyRef or secretKeyRef.
func (v *validator) keySelector(name, key string, p *field.Path) {
	v.check(p.Child("name"), name, validation.IsDNS1123Subdomain(name))
	if key == "" {
		v.addErrs(field.Required(p.Child("key"), ""))
	} else {
		v.check(p.Child("key"), key, validation.IsConfigMapKey(key))
	}
}

// objectName checks the name of the ConfigMap or Secret an envFrom names.
func (v *validator) objectName(name string, p *field.Path) {
	if name == "" {
		v.addErrs(field.Required(p, ""))
		return
	}
	v.check(p, name, validation.IsDNS1123Subdomain(name))
}
