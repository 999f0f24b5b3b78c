// Package watch owns staticlet's manifest sources: it reads pod manifests
// from where the user keeps them (a directory or a single file, like the
// kubelet's staticPodPath; a URL, like its staticPodURL) and turns them
// into whole snapshots of desired pods, with the reason for every rejected
// file. It does not decode manifests itself (a Decoder, normally
// pod.Decode, does), and it does not act on pods: the reconciler consumes
// the snapshots.
//
// Concurrency: a source is built by its constructor without starting
// anything; its Run method starts whatever the source needs (a file system
// watcher, timers, HTTP requests), keeps all of its state on the calling
// goroutine, and returns only after everything it started has stopped. Run
// must not be called twice at once on the same source. Snapshots share pod
// values with the source and with each other: receivers must treat them as
// read-only. Merge is a pure function, safe for concurrent use.
package watch

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// FileResult is what one manifest file currently contributes.
type FileResult struct {
	// Path is the file's path (a URL for a URL source).
	Path string
	// Pods are the pods in force from this file: the ones its current content
	// defines or, when Err is set, the ones its last good content defined
	// (nil if it never had good content), so that a bad edit does not stop
	// running pods.
	Pods []*pod.Pod
	// Objects are the ConfigMaps and Secrets in force from this file, kept
	// as its pods are.
	Objects []*pod.Object
	// Err says why the file's current content is rejected; nil when good.
	Err error
	// LastSuccess is, for a URL with Err set, when it last served good
	// manifests (zero if never). Zero for files.
	LastSuccess time.Time
}

// Snapshot is the whole view of one source at one moment. A source never
// sends a partial view: a file that cannot be read keeps its last good pods
// and a listing that fails keeps the previous files, each with an error.
type Snapshot struct {
	// Source names the source, e.g. "dir:/etc/kubernetes/manifests".
	Source string
	// Files are the source's manifest files, sorted by path. Ignored files
	// (dotfiles, editor leftovers, subdirectories) are absent, as are files
	// that were removed.
	Files []FileResult
	// Err is a problem with the source as a whole, such as a missing
	// directory. It is not fatal: the source keeps watching and sends a new
	// snapshot when the problem goes away.
	Err error
}

// DuplicateError is the error Merge gives a file that defines a pod already
// defined elsewhere.
type DuplicateError struct {
	// Key is the pod key defined twice.
	Key pod.Key
	// Winner is the path of the definition in force.
	Winner string
}

// Error returns the message the user sees in "staticlet get manifests".
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("pod %q is also defined in %s; this definition is ignored", e.Key.String(), e.Winner)
}

// DuplicateObjectError is the error Merge gives a file that defines a
// ConfigMap or Secret already defined elsewhere.
type DuplicateObjectError struct {
	Key    pod.ObjectKey
	Winner string // the path of the definition in force
}

// Error returns the message the user sees in "staticlet get manifests".
func (e *DuplicateObjectError) Error() string {
	return fmt.Sprintf("%s %q is also defined in %s; this definition is ignored", e.Key.Kind, e.Key.Namespace+"/"+e.Key.Name, e.Winner)
}

// Merge combines the latest snapshot of each source into the pods to run,
// sorted by key, and the results of every file, ordered by source name and
// then by path.
//
// Duplicate rule: a pod key (namespace/name) runs from one definition only.
// When several files define the same key, the definition from the source whose
// name sorts first wins and, within one source, the one from the file whose
// path sorts first. Every other definition is ignored: its file's result gets
// the error `pod "namespace/name" is also defined in <winning path>; this
// definition is ignored` and loses that pod from its Pods, while the other
// pods of the same file still run. The pods of a file whose current content
// is rejected (the last good ones) take part in this rule like any others.
// Source names start with their kind, and "dir:" sorts before "url:": a file
// on the node wins over the URL, so a local file can override what a fleet
// serves, and what runs does not depend on the network. ConfigMaps and
// Secrets follow the same rule, each kind on its own (a DuplicateObjectError).
func Merge(snaps []Snapshot) (pods []*pod.Pod, files []FileResult) {
	order := slices.Clone(snaps)
	slices.SortStableFunc(order, func(a, b Snapshot) int { return cmp.Compare(a.Source, b.Source) })

	winner := make(map[pod.Key]string)          // pod key -> path of the definition in force
	objWinner := make(map[pod.ObjectKey]string) // the same for objects
	for _, s := range order {
		fs := slices.Clone(s.Files)
		slices.SortStableFunc(fs, func(a, b FileResult) int { return cmp.Compare(a.Path, b.Path) })
		for _, f := range fs {
			kept, dups := firstWins(f.Pods, f.Path, winner, (*pod.Pod).Key,
				func(k pod.Key, w string) error { return &DuplicateError{Key: k, Winner: w} })
			keptObjs, objDups := firstWins(f.Objects, f.Path, objWinner, (*pod.Object).Key,
				func(k pod.ObjectKey, w string) error { return &DuplicateObjectError{Key: k, Winner: w} })
			dups = append(dups, objDups...)
			if len(dups) > 0 {
				// Only rebuild the result when something collided, so that an
				// unaffected file keeps its error value (and errors.Is on it) as is.
				f.Pods, f.Objects = kept, keptObjs
				f.Err = errors.Join(append([]error{f.Err}, dups...)...)
			}
			pods = append(pods, f.Pods...)
			files = append(files, f)
		}
	}
	slices.SortFunc(pods, func(a, b *pod.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return pods, files
}

// firstWins keeps the items of the file at path whose key no file before
// it defined (winner: key -> path of the definition in force, which it
// completes), and returns an error made by dup for each of the others.
func firstWins[T any, K comparable](items []T, path string, winner map[K]string, key func(T) K, dup func(K, string) error) ([]T, []error) {
	var errs []error
	kept := items[:0:0]
	for _, it := range items {
		k := key(it)
		if w, ok := winner[k]; ok {
			errs = append(errs, dup(k, w))
			continue
		}
		winner[k] = path
		kept = append(kept, it)
	}
	return kept, errs
}
