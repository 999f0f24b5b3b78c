package pod

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// staticlet's own annotations on a pod, in staticlet's domain. They tell
// staticlet how to run the pod; changing one does not replace the pod.
const (
	// AnnotationAfter names the pods (their metadata.name as written, in
	// the same namespace, comma-separated) this pod needs: it starts once
	// they are Ready (or a bounded wait is over), and stops before them.
	AnnotationAfter = "staticlet.io/after"
	// AnnotationRestartOnChange is "true" (every hostPath volume), or the
	// comma-separated names of hostPath volumes, whose content a change to
	// restarts the containers that mount them.
	AnnotationRestartOnChange = "staticlet.io/restart-on-change"
)

// ownAnnotationPrefix is the prefix of staticlet's own annotations.
const ownAnnotationPrefix = "staticlet.io/"

// After returns the names of the pods p needs (AnnotationAfter), as
// written in their manifests, without duplicates; nil when it names none.
func (p *Pod) After() []string {
	return splitList(p.Annotations[AnnotationAfter])
}

// AfterKeys returns the keys of the pods p needs (AnnotationAfter): in p's
// namespace, with the node's name appended as for every static pod.
func (p *Pod) AfterKeys() []Key {
	names := p.After()
	if len(names) == 0 {
		return nil
	}
	out := make([]Key, len(names))
	for i, n := range names {
		out[i] = Key{Namespace: p.Namespace, Name: FullName(n, p.Spec.NodeName)}
	}
	return out
}

// RestartOnChange returns the volumes of p whose content changes restart
// the containers that mount them (AnnotationRestartOnChange): hostPath
// volumes, whose files are watched, and configMap, secret and projected
// volumes, whose objects are.
func (p *Pod) RestartOnChange() []string {
	val := strings.TrimSpace(p.Annotations[AnnotationRestartOnChange])
	if val == "" || val == "false" {
		return nil
	}
	if val != "true" {
		return splitList(val)
	}
	var out []string
	for _, vol := range p.Spec.Volumes {
		if vol.HostPath != nil || isObjectVolume(&vol) {
			out = append(out, vol.Name)
		}
	}
	return out
}

// HasObjectVolumes tells whether p has a configMap, secret or projected
// volume.
func (p *Pod) HasObjectVolumes() bool {
	return slices.ContainsFunc(p.Spec.Volumes, func(v v1.Volume) bool { return isObjectVolume(&v) })
}

// isObjectVolume tells whether vol holds ConfigMaps or Secrets.
func isObjectVolume(vol *v1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.Projected != nil
}

// ObjectWatch is a configMap, secret or projected volume that restarts
// the containers mounting it when its objects change.
type ObjectWatch struct {
	Volume     string
	Containers []string // the containers that mount it, init containers included
	// Digest is what the volume's objects hold now; What names them for
	// an event: `ConfigMap "default/app"`.
	Digest, What string
}

// ObjectWatches returns the configMap, secret and projected volumes of p
// that its restart-on-change annotation names (or all of them with
// "true"), with the digest of the objects each holds as p.Objects has
// them.
func (p *Pod) ObjectWatches() []ObjectWatch {
	names := p.RestartOnChange()
	var out []ObjectWatch
	for _, vol := range p.Spec.Volumes {
		if !isObjectVolume(&vol) || !slices.Contains(names, vol.Name) {
			continue
		}
		w := ObjectWatch{Volume: vol.Name}
		var whats, digests []string
		for _, r := range volumeRefs(&vol) {
			o := p.Object(r.Kind, r.Name)
			whats = append(whats, fmt.Sprintf("%s %q", r.Kind, p.Namespace+"/"+r.Name))
			if o == nil {
				digests = append(digests, "missing")
			} else {
				digests = append(digests, o.Hash)
			}
		}
		w.What, w.Digest = strings.Join(whats, ", "), strings.Join(digests, ",")
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				if slices.ContainsFunc(c.VolumeMounts, func(m v1.VolumeMount) bool { return m.Name == vol.Name }) {
					w.Containers = append(w.Containers, c.Name)
				}
			}
		}
		out = append(out, w)
	}
	return out
}

// volumeRefs returns the objects a volume holds, in its order.
func volumeRefs(vol *v1.Volume) []ObjectRef {
	switch {
	case vol.ConfigMap != nil:
		return []ObjectRef{{Kind: KindConfigMap, Name: vol.ConfigMap.Name}}
	case vol.Secret != nil:
		return []ObjectRef{{Kind: KindSecret, Name: vol.Secret.SecretName}}
	case vol.Projected != nil:
		var refs []ObjectRef
		for _, s := range vol.Projected.Sources {
			if s.ConfigMap != nil {
				refs = append(refs, ObjectRef{Kind: KindConfigMap, Name: s.ConfigMap.Name})
			}
			if s.Secret != nil {
				refs = append(refs, ObjectRef{Kind: KindSecret, Name: s.Secret.Name})
			}
		}
		return refs
	}
	return nil
}

// WatchTarget is a file or directory on the host that container Container
// mounts, from volume Volume: a change to its content restarts it.
type WatchTarget struct {
	Container string
	Volume    string
	Path      string
}

// FileChange tells that the content of a watched path of pod Pod, mounted
// by container Container, changed.
type FileChange struct {
	Pod       Key
	Container string
	Path      string
	Time      time.Time
}

// WatchTargets returns what p's restart-on-change annotation asks to
// watch: for each container (init containers included), the host paths of
// the listed volumes it mounts (a subPath's part of it when it mounts
// one).
func (p *Pod) WatchTargets() []WatchTarget {
	vols := p.RestartOnChange()
	if len(vols) == 0 {
		return nil
	}
	paths := map[string]string{}
	for _, vol := range p.Spec.Volumes {
		if vol.HostPath != nil && slices.Contains(vols, vol.Name) {
			paths[vol.Name] = vol.HostPath.Path
		}
	}
	var out []WatchTarget
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				path, ok := paths[m.Name]
				if !ok {
					continue
				}
				if m.SubPath != "" {
					path = strings.TrimSuffix(path, "/") + "/" + m.SubPath
				}
				out = append(out, WatchTarget{Container: c.Name, Volume: m.Name, Path: path})
			}
		}
	}
	return out
}

// splitList splits a comma-separated annotation value, dropping empty
// entries and duplicates.
func splitList(val string) []string {
	var out []string
	for _, s := range strings.Split(val, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// ownAnnotations checks the values of staticlet's own annotations.
func (v *validator) ownAnnotations(p *v1.Pod, path *field.Path) {
	for k := range p.Annotations {
		if strings.HasPrefix(k, ownAnnotationPrefix) && k != AnnotationAfter && k != AnnotationRestartOnChange {
			v.add(path.Key(k), "unknown staticlet annotation; staticlet knows %s and %s", AnnotationAfter, AnnotationRestartOnChange)
		}
	}
	if val, ok := p.Annotations[AnnotationAfter]; ok {
		names := splitList(val)
		if len(names) == 0 {
			v.add(path.Key(AnnotationAfter), "names no pod: give the metadata.name of the pods this one needs, comma-separated")
		}
		for _, n := range names {
			if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
				v.add(path.Key(AnnotationAfter), "%q is not a pod name: %s", n, strings.Join(msgs, "; "))
			} else if n == p.Name {
				v.add(path.Key(AnnotationAfter), "the pod names itself (%q)", n)
			}
		}
	}
	if val, ok := p.Annotations[AnnotationRestartOnChange]; ok {
		v.restartOnChange(p, strings.TrimSpace(val), path.Key(AnnotationRestartOnChange))
	}
}

// restartOnChange checks the value of AnnotationRestartOnChange: "true",
// "false", or names of hostPath, configMap, secret or projected volumes
// of p.
func (v *validator) restartOnChange(p *v1.Pod, val string, path *field.Path) {
	if val == "true" || val == "false" {
		return
	}
	names := splitList(val)
	if len(names) == 0 {
		v.add(path, `is empty: "true" (every hostPath, configMap, secret and projected volume), "false", or the names of such volumes, comma-separated`)
	}
	for _, n := range names {
		i := slices.IndexFunc(p.Spec.Volumes, func(vol v1.Volume) bool { return vol.Name == n })
		switch {
		case i < 0:
			v.add(path, "names volume %q, which the pod does not have", n)
		case p.Spec.Volumes[i].HostPath == nil && !isObjectVolume(&p.Spec.Volumes[i]):
			v.add(path, "names volume %q, which is not a hostPath, configMap, secret or projected volume: only files from the host and ConfigMaps and Secrets are watched", n)
		}
	}
}
