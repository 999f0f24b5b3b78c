package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/desired"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status/printers"
	"github.com/staticlet/staticlet/internal/watch"
)

// diffFlags are the flags of staticlet diff.
type diffFlags struct {
	cf          clientFlags
	as          string
	prune       bool
	manifestDir string
	nodeName    string
}

func diffCommand() *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff FILE|DIR",
		Short: "Show what staticlet would do if a manifest replaced the one it runs",
		Long: `diff tells, before a manifest is saved into the manifest directory, what the
running staticlet would do with it: for each pod, nothing, restart these
containers, replace the pod (naming the pod-level fields that changed),
add or remove, followed by a unified diff of the pod as it would run. For
each ConfigMap and Secret: nothing, add, remove or change, with each key
added, removed or whose value changes (with its size), and how the change
reaches the pods that use it: no pod is replaced for it, a mounted
volume's files change in place, env takes the new values at a
container's next restart (a volume that staticlet.io/restart-on-change
names restarts its containers). A ConfigMap's values are shown as a
unified diff; a Secret's never are.

It asks the running staticlet (its status socket) what runs and which
manifest file defines which pods, decodes the new file with the daemon's
rules (the node name is the running pods'), and decides as the daemon does:
with the same function, on the same hashes. FILE stands for the file of the
same base name in the manifest directory (or the file --as names); its pods
that FILE no longer defines are removed, and pods that do not run yet are
added. DIR stands for a whole manifest directory, file by file: a file of
the manifest directory that DIR lacks is not a removal unless --prune is
given, as with kubectl diff.

Exit status, as kubectl diff: 0 when nothing would change, 1 when
something would, 2 on an error (an invalid manifest, whose errors are
printed naming the file, the line and the field; no staticlet answering).`,
		Example: `  # What would saving this edit of etcd's manifest do?
  staticlet diff ./etcd.yaml

  # The same file, compared with a manifest of another name
  staticlet diff ./etcd-new.yaml --as /etc/kubernetes/manifests/etcd.yaml

  # A whole new set of manifests, removals included
  staticlet diff --prune ./manifests/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	f.cf.add(cmd)
	cmd.Flags().StringVar(&f.as, "as", "", "the manifest path FILE stands for (default: the file of the same base name in the manifest directory)")
	cmd.Flags().BoolVar(&f.prune, "prune", false, "with DIR: the pods of manifest files that DIR does not have are removed")
	cmd.Flags().StringVar(&f.manifestDir, "manifest-dir", "/etc/kubernetes/manifests", "the manifest directory, when staticlet reports no manifest file to learn it from")
	cmd.Flags().StringVar(&f.nodeName, "node-name", "", "the node name, when no pod runs to learn it from (default: the host name)")
	return cmd
}

// liveState is what the running staticlet reports: the pods it runs, and
// its sources' manifest files with the pods of each.
type liveState struct {
	dir      string               // the manifest directory, or its one file
	nodeName string               // from the pods' spec.nodeName
	pods     map[pod.Key]*pod.Pod // in force, as the daemon holds them
	// sources are the snapshots the daemon's sources last sent, as far
	// as the status API tells: each file with the pods in force from it.
	sources []watch.Snapshot
	// objects are the ConfigMaps and Secrets in force.
	objects *objectsDiff
}

// podChange is the decision for one pod, with the text of the pod before
// and after.
type podChange struct {
	key      string
	file     string // the manifest it comes from (the new one, or the old one for a removal)
	change   pod.Change
	old, new string // the pods as YAML; empty when there is none
}

// runDiff runs staticlet diff on path.
func runDiff(ctx context.Context, out, errOut io.Writer, path string, f diffFlags) error {
	info, err := os.Stat(path)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("reading manifest path: %w", err)}
	}
	if f.as != "" && info.IsDir() {
		return &exitError{code: 2, err: fmt.Errorf("--as takes a FILE, and %s is a directory", path)}
	}
	now, err := readRunning(ctx, f)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	dirSource := now.dirSource()
	// target is the manifest path a file of path stands for.
	target := func(file string) string {
		switch {
		case f.as != "":
			return filepath.Clean(f.as)
		case slices.ContainsFunc(dirSource.Files, func(r watch.FileResult) bool { return r.Path == now.dir }):
			// The daemon reads one file, not a directory.
			return now.dir
		}
		return filepath.Join(now.dir, filepath.Base(file))
	}
	opts := pod.Options{NodeName: now.nodeName, SourceKind: pod.SourceFile, Seen: time.Now()}
	decode := func(file string, data []byte) (*pod.Manifest, error) {
		// Errors name the file as given; the pods get the identity they
		// would have in the manifest directory.
		if _, err := pod.DecodeFile(file, data, opts); err != nil {
			return nil, err
		}
		return pod.DecodeFile(target(file), data, opts)
	}
	snap := watch.ReadOnce(path, decode)
	if snap.Err != nil {
		return &exitError{code: 2, err: fmt.Errorf("%s: %w", path, snap.Err)}
	}
	var errs []error
	given := map[string]string{} // manifest path -> the file that stands for it
	var targets []watch.FileResult
	for _, file := range snap.Files {
		if file.Err != nil {
			errs = append(errs, file.Err)
			continue
		}
		to := target(file.Path)
		if other, ok := given[to]; ok {
			errs = append(errs, fmt.Errorf("%s: stands for %s, as %s does", file.Path, to, other))
			continue
		}
		given[to] = file.Path
		targets = append(targets, watch.FileResult{Path: to, Pods: file.Pods, Objects: file.Objects})
	}
	after, touched := now.replace(targets, f.prune && info.IsDir())
	// The daemon's own rules for a pod or an object defined twice and for
	// pods that wait for each other. The running files carry no error (their pods
	// are the ones in force), so an error here is one the change makes.
	afterPods, afterFiles := desired.Combine(after)
	for _, file := range afterFiles {
		if file.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cmp.Or(given[file.Path], file.Path), file.Err))
		}
	}
	changes := now.compare(afterPods, touched, after, given)
	objChanges, objErrs, err := now.objects.compare(ctx, now.objects.inForce(afterFiles, touched), touched, afterPods, now.pods, given)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	errs = append(errs, objErrs...)
	n, err := writeChanges(out, changes)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	nObjects, err := writeObjectChanges(out, objChanges, given)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(errOut, strings.TrimSpace(err.Error()))
		}
		return &exitError{code: 2, err: fmt.Errorf("%d manifest error(s)", len(errs))}
	}
	if nObjects > 0 {
		return &exitError{code: 1, raw: true, err: fmt.Errorf("%d pod(s) and %d ConfigMap(s) or Secret(s) would change", n, nObjects)}
	}
	if n > 0 {
		return &exitError{code: 1, raw: true, err: fmt.Errorf("%d pod(s) would change", n)}
	}
	return nil
}

// readRunning asks the running staticlet what it runs.
func readRunning(ctx context.Context, f diffFlags) (*liveState, error) {
	c := f.cf.client()
	list, err := c.Pods(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := c.Manifests(ctx)
	if err != nil {
		return nil, err
	}
	r := &liveState{dir: filepath.Clean(f.manifestDir), nodeName: f.nodeName, pods: map[pod.Key]*pod.Pod{}}
	reported := map[string]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		reported[p.Namespace+"/"+p.Name] = p
		if p.Spec.NodeName != "" {
			r.nodeName = p.Spec.NodeName
		}
	}
	if r.objects, err = newObjectsDiff(ctx, c); err != nil {
		return nil, err
	}
	for _, m := range ms {
		if dir, ok := strings.CutPrefix(m.Source, "dir:"); ok {
			r.dir = dir
		}
		if m.Path == "" {
			continue // the source's own error
		}
		if len(r.sources) == 0 || r.sources[len(r.sources)-1].Source != m.Source {
			r.sources = append(r.sources, watch.Snapshot{Source: m.Source})
		}
		file := watch.FileResult{Path: m.Path}
		for _, key := range m.Pods {
			// A pod of a manifest that does not run (yet) is not in force.
			if p, ok := reported[key]; ok {
				rp := pod.Reported(p, m.Path)
				file.Pods = append(file.Pods, rp)
				r.pods[rp.Key()] = rp
			}
		}
		for _, key := range m.Objects {
			if o := r.objects.apiObject(key); o != nil {
				file.Objects = append(file.Objects, o)
			}
		}
		src := &r.sources[len(r.sources)-1]
		src.Files = append(src.Files, file)
	}
	if r.nodeName == "" {
		if r.nodeName, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("no pod runs to learn the node name from, and the host name: %w", err)
		}
	}
	return r, nil
}

// dirSource returns the snapshot of the manifest directory.
func (r *liveState) dirSource() watch.Snapshot {
	for _, s := range r.sources {
		if s.Source == "dir:"+r.dir {
			return s
		}
	}
	return watch.Snapshot{Source: "dir:" + r.dir}
}

// replace returns the daemon's sources as they would be with the files of
// targets in the manifest directory (each replacing the file of its path,
// or added), without the directory's other files when prune is set, and
// the paths of the files replaced, added or pruned.
func (r *liveState) replace(targets []watch.FileResult, prune bool) ([]watch.Snapshot, map[string]bool) {
	touched := map[string]bool{}
	byPath := map[string]watch.FileResult{}
	for _, t := range targets {
		byPath[t.Path] = t
		touched[t.Path] = true
	}
	dir := r.dirSource()
	out := []watch.Snapshot{{Source: dir.Source}}
	for _, s := range r.sources {
		if s.Source != dir.Source {
			out = append(out, s)
		}
	}
	for _, file := range dir.Files {
		switch t, ok := byPath[file.Path]; {
		case ok:
			out[0].Files = append(out[0].Files, t)
			delete(byPath, file.Path)
		case prune:
			touched[file.Path] = true
		default:
			out[0].Files = append(out[0].Files, file)
		}
	}
	for _, t := range targets {
		if _, ok := byPath[t.Path]; ok {
			out[0].Files = append(out[0].Files, t)
		}
	}
	return out, touched
}

// compare decides for each pod of a touched file, before or after: the
// pods in force are now r.pods, and would be afterPods, from the sources
// after. given names the file that stands for a manifest path.
func (r *liveState) compare(afterPods []*pod.Pod, touched map[string]bool, after []watch.Snapshot, given map[string]string) []podChange {
	keys := map[pod.Key]bool{}
	for _, snaps := range [][]watch.Snapshot{r.sources, after} {
		for _, s := range snaps {
			for _, file := range s.Files {
				if touched[file.Path] {
					for _, p := range file.Pods {
						keys[p.Key()] = true
					}
				}
			}
		}
	}
	byKey := map[pod.Key]*pod.Pod{}
	for _, p := range afterPods {
		byKey[p.Key()] = p
	}
	var out []podChange
	for key := range keys {
		old, new := r.pods[key], byKey[key]
		file := ""
		if new != nil {
			file = cmp.Or(given[new.Source], new.Source)
		} else if old != nil {
			file = old.Source
		}
		out = append(out, podChange{key: key.String(), file: file, change: pod.Compare(old, new), old: podYAML(old), new: podYAML(new)})
	}
	return out
}

// writeChanges prints each pod's decision and diff, sorted by key, and
// returns how many pods would change.
func writeChanges(w io.Writer, changes []podChange) (int, error) {
	slices.SortFunc(changes, func(a, b podChange) int { return cmp.Compare(a.key, b.key) })
	n := 0
	for _, c := range changes {
		if c.change.Action != pod.ActionNone || c.old != c.new {
			n++
		}
		if _, err := fmt.Fprintf(w, "pod %s: %s\n", c.key, c.change.Reason()); err != nil {
			return 0, fmt.Errorf("writing the diff: %w", err)
		}
		for _, note := range c.change.Notes {
			fmt.Fprintf(w, "  note: %s\n", note)
		}
		from, to := c.key+" (running)", c.key+" ("+c.file+")"
		if c.old == "" {
			from = "/dev/null"
		}
		if c.new == "" {
			to = "/dev/null"
		}
		if err := printers.Unified(w, from, to, c.old, c.new); err != nil {
			return 0, fmt.Errorf("writing the diff of pod %s: %w", c.key, err)
		}
	}
	return n, nil
}

// podYAML returns p as it runs, without what changes at every read or
// edit (the UID, the resourceVersion, the creationTimestamp, and the
// annotations derived from
// the UID and the read time)
// and without its status: the part an edit decides. "" for nil.
func podYAML(p *pod.Pod) string {
	if p == nil {
		return ""
	}
	c := p.Pod.DeepCopy()
	c.UID, c.ResourceVersion, c.CreationTimestamp = "", "", metav1.Time{}
	for _, k := range []string{pod.AnnotationSeen, pod.AnnotationHash, pod.AnnotationSource} {
		delete(c.Annotations, k)
	}
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	b, err := yaml.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       v1.PodSpec        `json:"spec"`
	}{"v1", "Pod", c.ObjectMeta, c.Spec})
	if err != nil {
		// Encoding a core/v1 Pod does not fail; should it, say so in the text.
		return fmt.Sprintf("# %v\n", err)
	}
	return string(b)
}
