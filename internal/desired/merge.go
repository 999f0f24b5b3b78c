package desired

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// Manifest is the result of reading one manifest file (or URL), or a
// source's own error, as "staticlet get manifests" shows it.
type Manifest struct {
	// Source is the name of the source that read the file.
	Source string
	// Path is the file's path or the URL; empty for the source's own error.
	Path string
	// Pods are the keys ("namespace/name") of the pods in force from the file.
	Pods []string
	// Objects are the keys of the ConfigMaps and Secrets in force from the
	// file, as pod.ObjectKey prints them ("configmap/default/app").
	Objects []string
	// Error says why the file (or the source) is rejected; empty if it is not.
	Error string
	// LastSuccess is, for a URL whose last poll failed, when it last served
	// good manifests; zero otherwise.
	LastSuccess time.Time
}

// ManifestSink is where the manifest results go (the status store).
type ManifestSink interface {
	// SetManifests replaces every result with ms, which the Merger does
	// not touch after the call.
	SetManifests(ms []Manifest)
}

// DesiredSink is told of each desired set (image garbage collection,
// which keeps the images it names).
type DesiredSink interface {
	// SetDesired is given each desired set the Merger sends, whatever
	// the state of its pods; it must not change the pods nor block.
	SetDesired(pods []*pod.Pod)
}

// MergerConfig configures a Merger.
type MergerConfig struct {
	// Sources are the names of every source (watch.Snapshot.Source); no
	// desired set is sent before each of them has reported once.
	Sources []string
	// Manifests receives the results of every file after each snapshot;
	// required.
	Manifests ManifestSink
	// Desired, when set, is given every desired set as it is made, before
	// it is sent (so that what it keeps for a pod is kept before the pod
	// can start).
	Desired DesiredSink
	// Objects, when set, is told of the ConfigMaps and Secrets in force
	// after every snapshot.
	Objects ObjectSink
	// Devices, when set, refuses the pods that ask for devices no CDI
	// spec of the node defines; DevicesChanged says when its specs
	// changed, and the pods are judged again.
	Devices        DeviceCatalog
	DevicesChanged <-chan struct{}
	// Logger receives the duplicate definitions Merge ignores; nil
	// discards them. The sources log their own file errors.
	Logger *slog.Logger
}

// Merger combines the sources' snapshots into desired sets.
type Merger struct {
	cfg MergerConfig
}

// NewMerger returns a Merger; it starts nothing.
func NewMerger(cfg MergerConfig) *Merger {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Merger{cfg: cfg}
}

// Run reads snapshots from in until ctx is done and sends desired sets,
// sorted by key, to out. The first set goes out only once every source
// has reported, so that a pod is never stopped because its source has not
// been read yet; after that, a set not yet taken from out is replaced by
// a newer one, so the reader always gets the latest. The manifest results
// are passed on after every snapshot, the first ones included.
func (m *Merger) Run(ctx context.Context, in <-chan watch.Snapshot, out chan<- []*pod.Pod) error {
	state := newMergeState(m.cfg.Sources, m.cfg.Logger)
	state.devices = m.cfg.Devices
	var pending []*pod.Pod
	havePending := false
	for {
		var send chan<- []*pod.Pod // nil, so never ready, until a set is pending
		if havePending {
			send = out
		}
		var (
			pods      []*pod.Pod
			manifests []Manifest
			complete  bool
		)
		select {
		case <-ctx.Done():
			return nil
		case send <- pending:
			pending, havePending = nil, false
			continue
		case snap := <-in:
			pods, manifests, complete = state.add(snap)
			m.cfg.Logger.Debug("manifests read", "source", snap.Source, "files", len(snap.Files), "pods", len(pods))
		case <-m.cfg.DevicesChanged:
			pods, manifests, complete = state.merge()
		}
		m.cfg.Manifests.SetManifests(manifests)
		if m.cfg.Objects != nil {
			m.cfg.Objects.SetObjects(sortedObjects(state.objects))
		}
		if complete {
			pending, havePending = pods, true
			if m.cfg.Desired != nil {
				m.cfg.Desired.SetDesired(pods)
			}
		}
	}
}

// mergeState is what a Merger remembers between snapshots.
type mergeState struct {
	sources []string
	latest  map[string]watch.Snapshot // by source name
	logged  map[string]bool           // duplicates logged, as logDuplicates keeps them
	logger  *slog.Logger
	// objects are the ConfigMaps and Secrets in force, by key.
	objects map[pod.ObjectKey]*pod.Object
	// devices, when set, judges the devices pods ask for.
	devices DeviceCatalog
	// devicesPassed are the config hashes of the pods the last merge let
	// through devices' judgment: those, unchanged, keep running when it
	// turns against them.
	devicesPassed map[pod.Key]string
}

func newMergeState(sources []string, logger *slog.Logger) *mergeState {
	return &mergeState{
		sources: sources,
		latest:  make(map[string]watch.Snapshot, len(sources)),
		logged:  map[string]bool{},
		logger:  logger,
	}
}

// add records snap as its source's latest and returns the merged pods, the
// manifest results, and whether every source has now reported once. It
// logs the duplicates that were not there the previous time.
func (s *mergeState) add(snap watch.Snapshot) (pods []*pod.Pod, manifests []Manifest, complete bool) {
	s.latest[snap.Source] = snap
	return s.merge()
}

// merge merges the latest snapshots, as add does.
func (s *mergeState) merge() (pods []*pod.Pod, manifests []Manifest, complete bool) {
	snaps := make([]watch.Snapshot, 0, len(s.latest))
	for _, l := range s.latest {
		snaps = append(snaps, l)
	}
	slices.SortFunc(snaps, func(a, b watch.Snapshot) int { return cmp.Compare(a.Source, b.Source) })
	pods, files := Combine(snaps)
	pods, files, s.devicesPassed = refuseUnknownDevices(pods, files, s.devices, s.devicesPassed)
	files, s.objects = keepImmutable(files, s.objects)
	pods = resolveAll(pods, s.objects)
	s.logged = logDuplicates(files, s.logged, s.logger)
	complete = true
	for _, name := range s.sources {
		if _, ok := s.latest[name]; !ok {
			complete = false
		}
	}
	return pods, manifestResults(snaps, files), complete
}

// Combine merges the latest snapshot of each source into the pods to run
// and the results of every file, as the daemon does: watch.Merge's rule
// for a pod defined twice, then the pods that wait for each other in a
// cycle refused. `staticlet diff` calls it on the sources as they would be.
func Combine(snaps []watch.Snapshot) ([]*pod.Pod, []watch.FileResult) {
	pods, files := watch.Merge(snaps)
	return refuseCycles(pods, files)
}

// logDuplicates logs each definition Merge ignored, and each pod refused
// for a cycle, once while it lasts, and returns the set to pass next time.
func logDuplicates(files []watch.FileResult, logged map[string]bool, logger *slog.Logger) map[string]bool {
	dups := map[string]bool{}
	for _, f := range files {
		var de *watch.DuplicateError
		var do *watch.DuplicateObjectError
		var ce *CycleError
		var ie *ImmutableError
		var dv *DeviceError
		if errors.As(f.Err, &de) || errors.As(f.Err, &do) || errors.As(f.Err, &ce) || errors.As(f.Err, &ie) || errors.As(f.Err, &dv) {
			msg := f.Path + ": " + f.Err.Error()
			dups[msg] = true
			if !logged[msg] {
				logger.Warn("manifest ignored", "path", f.Path, "err", f.Err)
			}
		}
	}
	return dups
}

// manifestResults turns merged results into Manifests, source by source
// in the order of snaps: the source's own error first, then its files.
func manifestResults(snaps []watch.Snapshot, files []watch.FileResult) []Manifest {
	sourceOf := map[string]string{} // path -> source
	for _, s := range snaps {
		for _, f := range s.Files {
			sourceOf[f.Path] = s.Source
		}
	}
	ms := make([]Manifest, 0, len(files)+len(snaps))
	for _, s := range snaps {
		if s.Err != nil {
			ms = append(ms, Manifest{Source: s.Source, Error: s.Err.Error()})
		}
		for _, f := range files {
			if sourceOf[f.Path] != s.Source {
				continue
			}
			m := Manifest{Source: s.Source, Path: f.Path, LastSuccess: f.LastSuccess}
			for _, p := range f.Pods {
				m.Pods = append(m.Pods, p.Key().String())
			}
			for _, o := range f.Objects {
				m.Objects = append(m.Objects, o.Key().String())
			}
			if f.Err != nil {
				m.Error = f.Err.Error()
			}
			ms = append(ms, m)
		}
	}
	return ms
}
