package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/desired"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
	"github.com/staticlet/staticlet/internal/watch"
)

// objectView is what diff compares of a ConfigMap or a Secret. Of a
// Secret it holds no value: each value's size, and its digest under the
// run's random key (status.SecretDigests), which tells a changed value
// from an unchanged one.
type objectView struct {
	key       pod.ObjectKey
	file      string // the manifest it comes from
	typ       string // a Secret's type
	immutable bool
	sizes     map[string]int
	text      map[string]string // a ConfigMap's values, binary ones as their size
	digests   map[string]string // a Secret's values' digests; nil when not known
}

// newObjectView is the view of o, a decoded object, with a Secret's
// digests under digestKey.
func newObjectView(o *pod.Object, digestKey []byte) *objectView {
	v := &objectView{key: o.Key(), file: o.Source, immutable: o.Immutable(), sizes: map[string]int{}}
	for _, k := range o.Keys() {
		val, _ := o.Value(k)
		v.sizes[k] = len(val)
	}
	if o.Secret != nil {
		v.typ = string(o.Secret.Type)
		v.digests = status.SecretDigests(o, digestKey)
		return v
	}
	v.text = configMapText(o.ConfigMap)
	return v
}

// runningConfigMapView is the view of cm as the status API serves it.
func runningConfigMapView(cm *v1.ConfigMap) *objectView {
	v := &objectView{
		key:       pod.ObjectKey{Kind: pod.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name},
		file:      sourceFile(cm.Annotations[status.AnnotationObjectSource]),
		immutable: cm.Immutable != nil && *cm.Immutable,
		sizes:     map[string]int{},
		text:      configMapText(cm),
	}
	for k, val := range cm.Data {
		v.sizes[k] = len(val)
	}
	for k, val := range cm.BinaryData {
		v.sizes[k] = len(val)
	}
	return v
}

// runningSecretView is the view of s as the status API serves it: its
// sizes from staticlet.io/keys, its digests from staticlet.io/digests
// when it has them.
func runningSecretView(s *v1.Secret) (*objectView, error) {
	sizes, err := status.KeySizes(s.Annotations[status.AnnotationSecretKeys])
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	v := &objectView{
		key:       pod.ObjectKey{Kind: pod.KindSecret, Namespace: s.Namespace, Name: s.Name},
		file:      sourceFile(s.Annotations[status.AnnotationObjectSource]),
		typ:       string(s.Type),
		immutable: s.Immutable != nil && *s.Immutable,
		sizes:     sizes,
	}
	if d, ok := s.Annotations[status.AnnotationSecretDigests]; ok {
		if err := json.Unmarshal([]byte(d), &v.digests); err != nil {
			return nil, fmt.Errorf("secret %s/%s: parsing %s: %w", s.Namespace, s.Name, status.AnnotationSecretDigests, err)
		}
	}
	return v, nil
}

// configMapText is each value of cm, a binary one as its size.
func configMapText(cm *v1.ConfigMap) map[string]string {
	text := maps.Clone(cm.Data)
	if text == nil {
		text = map[string]string{}
	}
	for k, val := range cm.BinaryData {
		text[k] = fmt.Sprintf("<%d bytes of binaryData>", len(val))
	}
	return text
}

// lineSuffix is the ":line" that ends staticlet.io/source.
var lineSuffix = regexp.MustCompile(`:[0-9]+$`)

// sourceFile is the file of a staticlet.io/source value ("path:line").
func sourceFile(source string) string {
	return lineSuffix.ReplaceAllString(source, "")
}

// readRunningObjects asks the running staticlet for the ConfigMaps and
// Secrets in force. A staticlet that serves none (one older than them)
// has none.
func readRunningObjects(ctx context.Context, c *status.Client) (*v1.ConfigMapList, *v1.SecretList, error) {
	cms, err := c.ConfigMaps(ctx, "")
	if errors.Is(err, status.ErrNotFound) {
		return &v1.ConfigMapList{}, &v1.SecretList{}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	secrets, err := c.Secrets(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	return cms, secrets, nil
}

// objectChange is what would happen to one ConfigMap or Secret.
type objectChange struct {
	key      pod.ObjectKey
	old, new *objectView // nil: none
	lines    []string    // what changes, and what of it reaches pods
}

// changed reports whether the object would change.
func (c *objectChange) changed() bool { return len(c.lines) > 0 }

// objectsDiff is diff's part on ConfigMaps and Secrets.
type objectsDiff struct {
	c         *status.Client
	digestKey []byte
	// running are the objects in force, by key; api the same as the
	// status API serves them, as pod.Objects (a Secret's without data),
	// for the daemon's rule on objects defined twice, by ObjectKey.String.
	running map[pod.ObjectKey]*objectView
	api     map[string]*pod.Object
}

// newObjectsDiff reads the objects in force from the running staticlet,
// and picks the run's digest key.
func newObjectsDiff(ctx context.Context, c *status.Client) (*objectsDiff, error) {
	cms, secrets, err := readRunningObjects(ctx, c)
	if err != nil {
		return nil, err
	}
	d := &objectsDiff{c: c, digestKey: make([]byte, 32), running: map[pod.ObjectKey]*objectView{}, api: map[string]*pod.Object{}}
	if _, err := rand.Read(d.digestKey); err != nil {
		return nil, fmt.Errorf("picking a digest key: %w", err)
	}
	for i := range cms.Items {
		v := runningConfigMapView(&cms.Items[i])
		d.running[v.key] = v
		d.api[v.key.String()] = &pod.Object{ConfigMap: &cms.Items[i], Source: v.file}
	}
	for i := range secrets.Items {
		v, err := runningSecretView(&secrets.Items[i])
		if err != nil {
			return nil, err
		}
		d.running[v.key] = v
		d.api[v.key.String()] = &pod.Object{Secret: &secrets.Items[i], Source: v.file}
	}
	return d, nil
}

// apiObject returns the running object of key ("configmap/ns/name"), nil
// when there is none.
func (d *objectsDiff) apiObject(key string) *pod.Object { return d.api[key] }

// inForce returns the objects in force after the change, from files as
// the daemon's rules merged them: those of a touched path from its new
// file, the others as they run.
func (d *objectsDiff) inForce(files []watch.FileResult, touched map[string]bool) map[pod.ObjectKey]*objectView {
	out := map[pod.ObjectKey]*objectView{}
	for _, f := range files {
		for _, o := range f.Objects {
			switch {
			case touched[f.Path]:
				out[o.Key()] = newObjectView(o, d.digestKey)
			case d.running[o.Key()] != nil:
				out[o.Key()] = d.running[o.Key()]
			}
		}
	}
	return out
}

// compare decides for each object of a touched file, before or after,
// what would change, and what of it reaches pods: afterPods would run
// after, oldPods run now.
//
// An edit of an immutable object is an error, as the daemon's: errs has
// one for each, naming the file given for its path.
func (d *objectsDiff) compare(ctx context.Context, after map[pod.ObjectKey]*objectView, touched map[string]bool, afterPods []*pod.Pod, oldPods map[pod.Key]*pod.Pod, given map[string]string) (changes []objectChange, errs []error, err error) {
	keys := map[pod.ObjectKey]bool{}
	for k, v := range d.running {
		if touched[v.file] {
			keys[k] = true
		}
	}
	for k, v := range after {
		if touched[v.file] {
			keys[k] = true
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(keys), func(a, b pod.ObjectKey) int { return cmp.Compare(a.String(), b.String()) }) {
		ch := objectChange{key: k, old: d.running[k], new: after[k]}
		if ch.old != nil && ch.new != nil && k.Kind == pod.KindSecret && ch.old.digests == nil {
			s, err := d.c.Secret(ctx, k.Namespace, k.Name, d.digestKey)
			if err != nil {
				return nil, nil, err
			}
			if ch.old, err = runningSecretView(s); err != nil {
				return nil, nil, err
			}
		}
		ch.lines = dataChanges(ch.old, ch.new)
		if len(ch.lines) > 0 && ch.old != nil && ch.new != nil && ch.old.immutable {
			// The daemon's refusal, as an error on the new file.
			errs = append(errs, fmt.Errorf("%s: %w", cmp.Or(given[ch.new.file], ch.new.file), &desired.ImmutableError{Key: k}))
		}
		if len(ch.lines) > 0 {
			users := afterPods
			if ch.new == nil {
				users = slices.Collect(maps.Values(oldPods))
			}
			ch.lines = append(ch.lines, objectUses(k, users)...)
		}
		changes = append(changes, ch)
	}
	return changes, errs, nil
}

// dataChanges are the lines that say what changes from old to new (nil
// for none): the type, and each key added, removed or whose value
// changes, with its size; never a value.
func dataChanges(old, new *objectView) []string {
	switch {
	case old == nil && new == nil:
		return nil
	case old == nil:
		return []string{"key " + strings.Join(keySizes(new.sizes), ", key ")}
	case new == nil:
		return []string{"keys removed with it: " + strings.Join(slices.Sorted(maps.Keys(old.sizes)), ", ")}
	}
	var lines []string
	if old.typ != new.typ {
		lines = append(lines, fmt.Sprintf("type %s becomes %s", old.typ, new.typ))
	}
	for _, k := range slices.Sorted(maps.Keys(old.sizes)) {
		if _, ok := new.sizes[k]; !ok {
			lines = append(lines, fmt.Sprintf("key %s: removed", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(new.sizes)) {
		size, ok := old.sizes[k]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("key %s: added (%d bytes)", k, new.sizes[k]))
		case size != new.sizes[k] || valueChanged(old, new, k):
			lines = append(lines, fmt.Sprintf("key %s: value changed (%d bytes)", k, new.sizes[k]))
		}
	}
	if old.immutable != new.immutable {
		lines = append(lines, fmt.Sprintf("immutable: %t becomes %t", old.immutable, new.immutable))
	}
	if len(lines) > 0 && old.immutable {
		lines = append(lines, "note: the running one is immutable: staticlet refuses this edit with an error on the file, and keeps it as it is")
	}
	return lines
}

// valueChanged tells whether key's value differs between old and new, of
// the same size.
func valueChanged(old, new *objectView, key string) bool {
	if old.text != nil || new.text != nil {
		return old.text[key] != new.text[key]
	}
	return old.digests[key] != new.digests[key]
}

// keySizes is "key (N bytes)" for each key, sorted.
func keySizes(sizes map[string]int) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(sizes)) {
		out = append(out, fmt.Sprintf("%s (%d bytes)", k, sizes[k]))
	}
	return out
}

// objectUses are the lines that say how a change of the object k reaches
// the pods that refer to it: none of them is replaced or restarted for
// it (its hash does not change), a mounted volume's files update in
// place, env takes the new values at a container's next restart, and a
// volume the pod's staticlet.io/restart-on-change names restarts the
// containers that mount it.
func objectUses(k pod.ObjectKey, pods []*pod.Pod) []string {
	var lines []string
	slices.SortFunc(pods, func(a, b *pod.Pod) int { return cmp.Compare(a.Key().String(), b.Key().String()) })
	for _, p := range pods {
		if p.Namespace != k.Namespace {
			continue
		}
		restart := map[string]bool{}
		for _, v := range p.RestartOnChange() {
			restart[v] = true
		}
		for _, vol := range p.Spec.Volumes {
			if !volumeRefers(&vol, k) {
				continue
			}
			for _, c := range mountsOf(p, vol.Name) {
				var how string
				switch {
				case restart[vol.Name]:
					how = "container " + c.name + " restarts (" + pod.AnnotationRestartOnChange + ")"
				case c.subPath:
					how = "container " + c.name + " mounts it with subPath, which keeps its old content"
				default:
					how = "container " + c.name + " sees its files change in place, without a restart"
				}
				lines = append(lines, fmt.Sprintf("pod %s: volume %s: %s", p.Key(), vol.Name, how))
			}
		}
		for _, c := range envUsers(p, k) {
			lines = append(lines, fmt.Sprintf("pod %s: env of container %s: takes the new values at its next restart, not before", p.Key(), c))
		}
	}
	if len(lines) == 0 {
		return []string{"no pod refers to it"}
	}
	return append(lines, "no pod is replaced for it: an object's change changes no pod's hash")
}

// volumeRefers tells whether vol takes its files from the object k.
func volumeRefers(vol *v1.Volume, k pod.ObjectKey) bool {
	switch {
	case vol.ConfigMap != nil:
		return k.Kind == pod.KindConfigMap && vol.ConfigMap.Name == k.Name
	case vol.Secret != nil:
		return k.Kind == pod.KindSecret && vol.Secret.SecretName == k.Name
	case vol.Projected != nil:
		for _, s := range vol.Projected.Sources {
			if s.ConfigMap != nil && k.Kind == pod.KindConfigMap && s.ConfigMap.Name == k.Name ||
				s.Secret != nil && k.Kind == pod.KindSecret && s.Secret.Name == k.Name {
				return true
			}
		}
	}
	return false
}

// mount is a container that mounts a volume.
type mount struct {
	name    string
	subPath bool
}

// mountsOf returns the containers of p (init ones first) that mount the
// volume named vol.
func mountsOf(p *pod.Pod, vol string) []mount {
	var out []mount
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				if m.Name == vol {
					out = append(out, mount{name: c.Name, subPath: m.SubPath != "" || m.SubPathExpr != ""})
					break
				}
			}
		}
	}
	return out
}

// envUsers returns the containers of p (init ones first) whose env or
// envFrom takes values from the object k.
func envUsers(p *pod.Pod, k pod.ObjectKey) []string {
	var out []string
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if slices.ContainsFunc(c.Env, func(e v1.EnvVar) bool { return envVarRefers(e, k) }) ||
				slices.ContainsFunc(c.EnvFrom, func(e v1.EnvFromSource) bool { return envFromRefers(e, k) }) {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

func envVarRefers(e v1.EnvVar, k pod.ObjectKey) bool {
	if e.ValueFrom == nil {
		return false
	}
	if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
		return k.Kind == pod.KindConfigMap && r.Name == k.Name
	}
	if r := e.ValueFrom.SecretKeyRef; r != nil {
		return k.Kind == pod.KindSecret && r.Name == k.Name
	}
	return false
}

func envFromRefers(e v1.EnvFromSource, k pod.ObjectKey) bool {
	if r := e.ConfigMapRef; r != nil {
		return k.Kind == pod.KindConfigMap && r.Name == k.Name
	}
	if r := e.SecretRef; r != nil {
		return k.Kind == pod.KindSecret && r.Name == k.Name
	}
	return false
}

// writeObjectChanges prints each object's decision, what changes and,
// for a ConfigMap, the unified diff of its values; it returns how many
// objects would change. A Secret's values are never printed.
// given names the file that stands for a manifest path.
func writeObjectChanges(w io.Writer, changes []objectChange, given map[string]string) (int, error) {
	n := 0
	for _, c := range changes {
		name := strings.ToLower(c.key.Kind) + " " + c.key.Namespace + "/" + c.key.Name
		action := "nothing"
		switch {
		case c.old == nil:
			action = "add"
		case c.new == nil:
			action = "remove"
		case c.changed():
			action = "change"
		}
		if c.changed() {
			n++
		}
		if _, err := fmt.Fprintf(w, "%s: %s\n", name, action); err != nil {
			return 0, fmt.Errorf("writing the diff: %w", err)
		}
		for _, l := range c.lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if c.key.Kind != pod.KindConfigMap {
			continue
		}
		from, to := c.key.String()+" (running)", "/dev/null"
		if c.old == nil {
			from = "/dev/null"
		}
		if c.new != nil {
			to = c.key.String() + " (" + cmp.Or(given[c.new.file], c.new.file) + ")"
		}
		if err := printers.Unified(w, from, to, valuesYAML(c.old), valuesYAML(c.new)); err != nil {
			return 0, fmt.Errorf("writing the diff of %s: %w", name, err)
		}
	}
	return n, nil
}

// valuesYAML is a ConfigMap's values as YAML, "" for none.
func valuesYAML(v *objectView) string {
	if v == nil {
		return ""
	}
	b, err := yaml.Marshal(v.text)
	if err != nil {
		// Encoding a map of strings does not fail; should it, say so in the text.
		return fmt.Sprintf("# %v\n", err)
	}
	return string(b)
}
