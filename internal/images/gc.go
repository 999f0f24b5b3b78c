package images

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// Event reasons of image garbage collection.
const (
	// ReasonImageGarbageCollected: an image was removed.
	ReasonImageGarbageCollected = "ImageGarbageCollected"
	// ReasonImageGCFailed, the kubelet's: a collection could not run or
	// an image could not be removed.
	ReasonImageGCFailed = "ImageGCFailed"
	// ReasonFreeDiskSpaceFailed, the kubelet's: the images that may go did
	// not free enough to reach the low threshold.
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
)

// EventSink receives the events of image garbage collection.
type EventSink interface {
	Event(e pod.Event)
}

// GCConfig configures a GC.
type GCConfig struct {
	Policy GCPolicy
	// Period is how often images are collected; default DefaultGCPeriod.
	Period time.Duration
	// Store is the image store collected. Required.
	Store *Store
	// Node names the node, the object of the events.
	Node string
	// Events receives an event per image removed and per failure. Required.
	Events EventSink
	// Collected, when set, is told of each image removed, with why
	// (RemovedAge or RemovedSpace) and the bytes counted freed. It must
	// not block.
	Collected func(reason string, bytes int64)
	Logger    *slog.Logger
}

// GC is the node's image garbage collection, with the kubelet's policy: it
// removes the images of staticlet's namespace that no container was made
// from, that no current manifest names and whose import file has left the
// import directory, when unused for longer than the maximum age, or for
// space when the image filesystem is fuller than the high threshold.
//
// When each image was last used is the LabelLastUsed of its record in
// containerd, set at each collection to the images containers are made
// from then (and to those they were made from at the collection before,
// so an image last used between two collections counts from the later
// one); an image never used counts from when it came to the node. The
// image filesystem is the filesystem of the root of containerd's
// snapshotter (else of its content store), read with statfs; what removing
// an image frees is counted as its content's size, as the kubelet counts
// it through the CRI.
//
// Nothing is collected before SetDesired and SetImportFiles have each been
// called once. Run owns its goroutine; the setters and Images may be
// called from any goroutine.
type GC struct {
	cfg   GCConfig
	log   *slog.Logger
	store gcStore // cfg.Store

	// mu guards the fields below: the names current manifests and import
	// files hold (normalized), nil until first set.
	mu      sync.Mutex
	wanted  map[string]bool
	imports map[string]bool
	changed chan struct{} // cap 1: a setter was called

	// Owned by Run's goroutine.
	usedLastPass map[string]bool
	fsWarned     bool // the image filesystem's usage could not be read
}

// NewGC returns a GC for cfg, with defaults filled in. It starts nothing.
func NewGC(cfg GCConfig) *GC {
	if cfg.Period <= 0 {
		cfg.Period = DefaultGCPeriod
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GC{cfg: cfg, log: log, store: cfg.Store, changed: make(chan struct{}, 1)}
}

// gcStore is what a GC needs of its Store.
type gcStore interface {
	ListImages(ctx context.Context) ([]Info, error)
	containerImages(ctx context.Context) (map[string]bool, error)
	markUsed(ctx context.Context, name string, at time.Time) error
	removeImage(ctx context.Context, name, digest string, sync bool) error
	imageFSUsage(ctx context.Context) (fsUsage, error)
}

// SetDesired records the images the pods of the desired set name (every
// container's, init containers' included), whatever the pods' state.
func (g *GC) SetDesired(pods []*pod.Pod) {
	names := map[string]bool{}
	for _, p := range pods {
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			if name, err := normalizeRef(c.Image); err == nil {
				names[name] = true
			}
		}
	}
	g.mu.Lock()
	g.wanted = names
	g.mu.Unlock()
	g.poke()
}

// SetImportFiles records the files now in the import directory, whose
// images stay.
func (g *GC) SetImportFiles(files []FileResult) {
	names := map[string]bool{}
	for _, f := range files {
		for _, name := range f.Images {
			names[name] = true
		}
	}
	g.mu.Lock()
	g.imports = names
	g.mu.Unlock()
	g.poke()
}

func (g *GC) poke() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// protected returns copies of the names manifests and import files hold,
// and whether both are known yet.
func (g *GC) protected() (wanted, imports map[string]bool, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.wanted), maps.Clone(g.imports), g.wanted != nil && g.imports != nil
}

// Run collects once SetDesired and SetImportFiles have been called, then
// every Period, until ctx ends. A failed collection is an event, and is
// tried again at the next period.
func (g *GC) Run(ctx context.Context) error {
	began := time.Now()
	for {
		if _, _, known := g.protected(); known {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-g.changed:
		}
	}
	tick := time.NewTicker(g.cfg.Period)
	defer tick.Stop()
	for {
		if err := g.collect(ctx, began); err != nil && ctx.Err() == nil {
			g.event(pod.EventWarning, ReasonImageGCFailed, "Image garbage collection failed: "+err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// KeptImage is an image of staticlet's namespace with the reasons
// collection keeps it.
type KeptImage struct {
	Info
	// Kept are the reasons it is kept whatever its age and the disk's
	// usage (KeptInUse, KeptManifest, KeptImportFile, sorted); none when
	// it may go. An image is kept when any of its names is (they are
	// removed together).
	Kept []string
}

// Images lists the images of staticlet's namespace, sorted by name, with
// why each is kept. Info.LastUsed is as last recorded: zero for an image
// no container has used since collection began recording.
func (g *GC) Images(ctx context.Context) ([]KeptImage, error) {
	recs, err := g.store.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	used, err := g.store.containerImages(ctx)
	if err != nil {
		return nil, err
	}
	wanted, imports, _ := g.protected()
	kept := map[string][]string{}
	for _, img := range groupImages(recs, used, wanted, imports) {
		for _, name := range img.Names {
			kept[name] = img.Kept
		}
	}
	out := make([]KeptImage, len(recs))
	for i, r := range recs {
		out[i] = KeptImage{Info: r, Kept: kept[r.Name]}
	}
	return out, nil
}

// collect runs one collection.
func (g *GC) collect(ctx context.Context, began time.Time) error {
	now := time.Now()
	recs, err := g.store.ListImages(ctx)
	if err != nil {
		return err
	}
	used, err := g.store.containerImages(ctx)
	if err != nil {
		return err
	}
	recs = g.markUsed(ctx, recs, used, now)
	wanted, imports, _ := g.protected()
	in := gcInput{Policy: g.cfg.Policy, Images: groupImages(recs, used, wanted, imports), Now: now, Began: began}
	in.Usage, err = g.store.imageFSUsage(ctx)
	switch {
	case err != nil && !g.fsWarned:
		g.log.Warn("image garbage collection for space is off until the image filesystem can be read", "err", err)
		g.fsWarned = true
	case err == nil && g.fsWarned:
		g.log.Info("image garbage collection for space is back on")
		g.fsWarned = false
	}
	plan := planGC(in)
	var freed int64 // by age or for space: both count toward the space to free
	for i, r := range plan {
		n, err := g.remove(ctx, r, i == len(plan)-1)
		if err != nil {
			g.event(pod.EventWarning, ReasonImageGCFailed, err.Error())
			continue
		}
		freed += n
	}
	if toFree := spaceToFree(g.cfg.Policy, in.Usage); toFree > freed {
		g.event(pod.EventWarning, ReasonFreeDiskSpaceFailed, fmt.Sprintf(
			"Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.",
			toFree, freed))
	}
	return nil
}

// markUsed labels the images containers use now, or used at the
// collection before, as used now, and returns recs with that.
func (g *GC) markUsed(ctx context.Context, recs []Info, used map[string]bool, now time.Time) []Info {
	last := g.usedLastPass
	g.usedLastPass = map[string]bool{}
	for i, r := range recs {
		if !used[r.Name] && !last[r.Name] {
			continue
		}
		if used[r.Name] {
			g.usedLastPass[r.Name] = true
		}
		if err := g.store.markUsed(ctx, r.Name, now); err != nil {
			// Not fatal: the image is in use, or counts from the older
			// label, which at worst removes it one period early.
			g.log.Warn("recording when an image was last used", "image", r.Name, "err", err)
			continue
		}
		recs[i].LastUsed = now
	}
	return recs
}

// remove removes every name of r's image, unless a manifest has named one
// since the collection began (the reconciler may be about to start it),
// and reports the bytes counted freed. sync is for the last image of a
// collection: containerd frees the content before it returns.
func (g *GC) remove(ctx context.Context, r removal, sync bool) (int64, error) {
	wanted, imports, _ := g.protected()
	for _, name := range r.Image.Names {
		if wanted[name] || imports[name] {
			return 0, nil
		}
	}
	for i, name := range r.Image.Names {
		if err := g.store.removeImage(ctx, name, r.Image.Digest, sync && i == len(r.Image.Names)-1); err != nil {
			return 0, err
		}
	}
	names := strings.Join(r.Image.Names, ", ")
	var why string
	switch r.Reason {
	case RemovedAge:
		why = fmt.Sprintf("not used for %s, more than imageMaximumGCAge %s", time.Since(r.Image.LastUsed).Round(time.Second), g.cfg.Policy.MaxAge)
	default:
		why = fmt.Sprintf("to free space: image filesystem at or above imageGCHighThresholdPercent %d%%", g.cfg.Policy.HighThresholdPercent)
	}
	g.event(pod.EventNormal, ReasonImageGarbageCollected, fmt.Sprintf("Removed image %s (%s, %d bytes): %s", names, r.Image.Digest, r.Image.Size, why))
	if g.cfg.Collected != nil {
		g.cfg.Collected(r.Reason, r.Image.Size)
	}
	return r.Image.Size, nil
}

func (g *GC) event(typ, reason, msg string) {
	g.cfg.Events.Event(pod.Event{Time: time.Now(), Object: "node/" + g.cfg.Node, Type: typ, Reason: reason, Message: msg})
}

// groupImages groups image records by digest (removing an image removes
// all its names, as the kubelet removes an image by ID), with the reasons
// each is kept: a name a container was made from, one a manifest names,
// one an import file holds.
func groupImages(recs []Info, used, wanted, imports map[string]bool) []gcImage {
	byDigest := map[string]*gcImage{}
	var order []string
	for _, r := range recs {
		img, ok := byDigest[r.Digest]
		if !ok {
			img = &gcImage{Digest: r.Digest, Size: r.Size, Created: r.Created}
			byDigest[r.Digest] = img
			order = append(order, r.Digest)
		}
		img.Names = append(img.Names, r.Name)
		if r.Created.Before(img.Created) {
			img.Created = r.Created
		}
		if r.LastUsed.After(img.LastUsed) {
			img.LastUsed = r.LastUsed
		}
		for reason, set := range map[string]map[string]bool{KeptInUse: used, KeptManifest: wanted, KeptImportFile: imports} {
			if set[r.Name] && !slices.Contains(img.Kept, reason) {
				img.Kept = append(img.Kept, reason)
			}
		}
	}
	out := make([]gcImage, 0, len(order))
	for _, d := range order {
		img := byDigest[d]
		if img.LastUsed.IsZero() {
			img.LastUsed = img.Created // never used: counts from its coming
		}
		slices.Sort(img.Kept)
		out = append(out, *img)
	}
	return out
}
