package desired

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// ObjectSink is told of the ConfigMaps and Secrets in force (the status
// store).
type ObjectSink interface {
	// SetObjects replaces every object with objs, sorted by kind,
	// namespace and name; they are shared and must not be changed.
	SetObjects(objs []*pod.Object)
}

// ImmutableError refuses an edit of an object marked immutable: the
// version in force before stays, as the apiserver refuses such an update.
type ImmutableError struct {
	Key pod.ObjectKey
}

func (e *ImmutableError) Error() string {
	return fmt.Sprintf("%s %q is immutable: its data and its immutable field cannot change, and the version read before stays in force; to change it, remove it, let staticlet read the file without it, then add it again",
		e.Key.Kind, e.Key.Namespace+"/"+e.Key.Name)
}

// keepImmutable refuses the edits of immutable objects in files: prev are
// the objects in force before, by key. It returns the files with the
// objects in force (an edited immutable object replaced by its version in
// prev, and the file given an ImmutableError), and those objects by key.
func keepImmutable(files []watch.FileResult, prev map[pod.ObjectKey]*pod.Object) ([]watch.FileResult, map[pod.ObjectKey]*pod.Object) {
	inForce := map[pod.ObjectKey]*pod.Object{}
	out := files
	copied := false
	for i, f := range files {
		var errs []error
		objs := f.Objects
		for j, o := range f.Objects {
			k := o.Key()
			old := prev[k]
			if old == nil || !old.Immutable() || o == old || o.Hash == old.Hash && o.Immutable() {
				inForce[k] = o
				continue
			}
			if !copied {
				out, copied = slices.Clone(files), true
			}
			if len(errs) == 0 {
				objs = slices.Clone(f.Objects)
			}
			objs[j] = old
			inForce[k] = old
			errs = append(errs, &ImmutableError{Key: k})
		}
		if len(errs) > 0 {
			out[i].Objects = objs
			out[i].Err = errors.Join(append([]error{f.Err}, errs...)...)
		}
	}
	return out, inForce
}

// resolveAll gives each pod the objects it refers to among objs.
func resolveAll(pods []*pod.Pod, objs map[pod.ObjectKey]*pod.Object) []*pod.Pod {
	find := func(k pod.ObjectKey) *pod.Object { return objs[k] }
	out := make([]*pod.Pod, len(pods))
	for i, p := range pods {
		out[i] = pod.Resolve(p, find)
	}
	return out
}

// sortedObjects returns objs sorted by kind, namespace and name.
func sortedObjects(objs map[pod.ObjectKey]*pod.Object) []*pod.Object {
	out := make([]*pod.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *pod.Object) int {
		ka, kb := a.Key(), b.Key()
		return cmp.Or(cmp.Compare(ka.Kind, kb.Kind), cmp.Compare(ka.Namespace, kb.Namespace), cmp.Compare(ka.Name, kb.Name))
	})
	return out
}
