// Package devices is the node's devices as containers get them: the
// host's device nodes a privileged container sees (HostDevices, as
// containerd's CRI gives them), and the CDI devices that the Container
// Device Interface specs in the spec directories name (a Registry). A
// Registry reads the specs through the CDI library, re-reads them when
// the directories change (Run), answers what exists (Kinds, KnownKind,
// KnownDevice, Devices) and applies a device's edits to an OCI spec
// (Inject). It does not allocate: which container holds which device is
// package sandbox's business, recorded on containerd's containers.
//
// A Registry is safe for concurrent use. Its only goroutine is Run's
// caller's: Run watches the directories until its context ends.
package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/fsnotify/fsnotify"
	"github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// AnnotationPrefix starts the keys of a pod's annotations that name CDI
// devices for all its containers: cdi.k8s.io/<key>: vendor.com/class=name,...
const AnnotationPrefix = cdi.AnnotationPrefix

// all is the device name that stands for every device of a kind, when the
// kind's spec names no device "all" itself.
const all = "all"

// DefaultSpecDirs are the directories CDI specs are read from by default,
// as containerd's cdi_spec_dirs: the static ones first, then the
// generated ones, which win on a conflict.
func DefaultSpecDirs() []string { return []string{"/etc/cdi", "/var/run/cdi"} }

// Config configures a Registry.
type Config struct {
	// SpecDirs are the directories of CDI specs, in rising priority;
	// default DefaultSpecDirs. A directory that does not exist names no
	// device until it appears.
	SpecDirs []string
	// Changed, when set, is called after a re-read that changed the
	// devices the specs name or their files, from Run's goroutine: it
	// must not block.
	Changed func()
	// Logger receives the specs' errors.
	Logger *slog.Logger
}

// Kind is one kind of CDI device (vendor.com/class) with its devices.
type Kind struct {
	Name    string
	Devices []Device
}

// Device is one CDI device.
type Device struct {
	// Name is the fully qualified name, vendor.com/class=name.
	Name string
	// Spec is the spec file that names it.
	Spec string
}

// Registry is the CDI devices the node's specs name.
type Registry struct {
	cfg   Config
	cache *cdi.Cache
	// mu guards kinds, the listing as of the last refresh.
	mu    sync.Mutex
	kinds []Kind
}

// New reads the specs of cfg.SpecDirs. It starts nothing: Run watches
// them for changes.
func New(cfg Config) *Registry {
	if len(cfg.SpecDirs) == 0 {
		cfg.SpecDirs = DefaultSpecDirs()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Manual refresh: the library's own watch is a goroutine nothing
	// here could wait for.
	cache, _ := cdi.NewCache(cdi.WithAutoRefresh(false), cdi.WithSpecDirs(cfg.SpecDirs...)) // its error is always nil
	r := &Registry{cfg: cfg, cache: cache}
	r.kinds = r.list()
	r.logErrors()
	return r
}

// SpecDirs are the directories the registry reads.
func (r *Registry) SpecDirs() []string { return slices.Clone(r.cfg.SpecDirs) }

// Refresh reads the specs again, and tells Changed when what they name
// changed. Errors of single specs are logged, and their devices left
// out.
func (r *Registry) Refresh() {
	_ = r.cache.Refresh() // the same errors as GetErrors, logged below
	r.logErrors()
	kinds := r.list()
	r.mu.Lock()
	changed := !equalKinds(r.kinds, kinds)
	r.kinds = kinds
	r.mu.Unlock()
	if changed && r.cfg.Changed != nil {
		r.cfg.Changed()
	}
}

func (r *Registry) logErrors() {
	for path, errs := range r.cache.GetErrors() {
		r.cfg.Logger.Warn("reading a CDI spec", "path", path, "err", errors.Join(errs...))
	}
}

// pollPeriod is how often the specs are read again when the directories
// cannot be watched.
const pollPeriod = 30 * time.Second

// Run watches the spec directories, and a missing one's nearest parent
// that exists, and refreshes the registry on every change, until ctx
// ends; it returns nil then. Without a watch (the node's inotify
// instances used up) it reads them again every pollPeriod instead: the
// devices matter less than the pods that do not use them.
func (r *Registry) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.cfg.Logger.Warn("watching the CDI spec directories; reading them every 30s instead", "err", err)
		return r.poll(ctx)
	}
	defer w.Close()
	r.watchDirs(w)
	// What changed before the watch began.
	r.Refresh()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			// A directory may have appeared or gone: watch again, then
			// re-read everything rather than trust the event.
			r.watchDirs(w)
			r.Refresh()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.cfg.Logger.Warn("watching the CDI spec directories", "err", err)
			r.Refresh()
		}
	}
}

// poll refreshes the registry every pollPeriod until ctx ends.
func (r *Registry) poll(ctx context.Context) error {
	t := time.NewTicker(pollPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.Refresh()
		}
	}
}

// watchDirs adds each spec directory to w, or its nearest existing
// parent while it does not exist. Adding what is watched already does
// nothing.
func (r *Registry) watchDirs(w *fsnotify.Watcher) {
	for _, dir := range r.cfg.SpecDirs {
		watchNearest(w.Add, dir)
	}
}

// maxWatchTries bounds watchNearest's retries when the directories keep
// appearing and going: an event on the parent watched last brings the
// next try.
const maxWatchTries = 8

// watchNearest adds dir to the watch through add, or its nearest parent
// that exists. A directory made between a failed add of it and the add
// of its parent gives no event on the parent, so once the parent is
// watched, a child that exists by then is tried again.
func watchNearest(add func(string) error, dir string) {
	dir = filepath.Clean(dir)
	for range maxWatchTries {
		watched := addNearest(add, dir)
		if watched == "" || watched == dir {
			return
		}
		if _, err := os.Stat(childToward(watched, dir)); err != nil {
			return // still missing: the parent's watch will tell
		}
	}
}

// addNearest adds dir, or the nearest of its parents that exists, and
// returns the one added; "" when none could be.
func addNearest(add func(string) error, dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		err := add(d)
		if err == nil {
			return d
		}
		if !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
			return ""
		}
	}
}

// childToward is the entry of parent on the way down to dir.
func childToward(parent, dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if filepath.Dir(d) == parent || d == filepath.Dir(d) {
			return d
		}
	}
}

// list reads the cache into kinds, each with its devices, sorted by name.
func (r *Registry) list() []Kind {
	var out []Kind
	for _, name := range r.cache.ListDevices() {
		d := r.cache.GetDevice(name)
		if d == nil {
			continue
		}
		kind := KindOf(name)
		if len(out) == 0 || out[len(out)-1].Name != kind {
			out = append(out, Kind{Name: kind})
		}
		k := &out[len(out)-1]
		k.Devices = append(k.Devices, Device{Name: name, Spec: d.GetSpec().GetPath()})
	}
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(a.Name, b.Name) })
	for _, k := range out {
		slices.SortFunc(k.Devices, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

func equalKinds(a, b []Kind) bool {
	return slices.EqualFunc(a, b, func(x, y Kind) bool {
		return x.Name == y.Name && slices.Equal(x.Devices, y.Devices)
	})
}

// Kinds lists each kind the specs name, with its devices and their spec
// files, sorted by name.
func (r *Registry) Kinds() []Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.kinds)
	for i := range out {
		out[i].Devices = slices.Clone(out[i].Devices)
	}
	return out
}

// kind returns the kind named name, if the specs name it.
func (r *Registry) kind(name string) (Kind, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// KnownKind tells whether the specs name a device of kind
// (vendor.com/class).
func (r *Registry) KnownKind(kind string) bool {
	_, ok := r.kind(kind)
	return ok
}

// KnownDevice tells whether the specs name the device qualified
// (vendor.com/class=name); vendor.com/class=all is known when its kind is.
func (r *Registry) KnownDevice(qualified string) bool {
	k, ok := r.kind(KindOf(qualified))
	if !ok {
		return false
	}
	_, _, name := parser.ParseDevice(qualified)
	return name == all || slices.ContainsFunc(k.Devices, func(d Device) bool { return d.Name == qualified })
}

// Devices are the devices of kind that can be handed out one by one, by
// their qualified names, sorted: all of its devices but one named "all",
// which stands for the others.
func (r *Registry) Devices(kind string) []string {
	k, _ := r.kind(kind)
	var out []string
	for _, d := range k.Devices {
		if _, _, name := parser.ParseDevice(d.Name); name != all {
			out = append(out, d.Name)
		}
	}
	return out
}

// Expand replaces each vendor.com/class=all whose spec names no device
// "all" with every device of the kind, and drops repeats.
func (r *Registry) Expand(names []string) []string {
	var out []string
	for _, n := range names {
		_, _, name := parser.ParseDevice(n)
		if name == all && r.cache.GetDevice(n) == nil {
			out = append(out, r.Devices(KindOf(n))...)
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Inject applies the edits of the named devices (Expand's forms), and
// of their specs, to s: device nodes with their cgroup rules, mounts,
// environment and hooks.
func (r *Registry) Inject(s *specs.Spec, devices []string) error {
	if len(devices) == 0 {
		return nil
	}
	if _, err := r.cache.InjectDevices(s, r.Expand(devices)...); err != nil {
		return fmt.Errorf("injecting CDI devices %s: %w", strings.Join(devices, ", "), err)
	}
	return nil
}

// KindOf is the kind (vendor.com/class) of a qualified device name.
func KindOf(qualified string) string {
	vendor, class, _ := parser.ParseDevice(qualified)
	if vendor == "" {
		return ""
	}
	return vendor + "/" + class
}

// IsKind tells whether name has the form of a CDI kind, vendor.com/class:
// a resource name that may name devices.
func IsKind(name string) bool {
	vendor, class := parser.ParseQualifier(name)
	return vendor != "" && parser.ValidateVendorName(vendor) == nil && parser.ValidateClassName(class) == nil
}

// FromAnnotations returns the devices a pod's CDI annotations name
// (cdi.k8s.io/<key>: vendor.com/class=name,...), sorted, without
// repeats; an error names the first malformed one.
func FromAnnotations(annotations map[string]string) ([]string, error) {
	_, devs, err := cdi.ParseAnnotations(annotations)
	if err != nil {
		return nil, fmt.Errorf("reading the CDI annotations: %w", err)
	}
	slices.Sort(devs)
	return slices.Compact(devs), nil
}

// HostDevices are the host's device nodes under /dev, as containerd's CRI
// gives them to a privileged container: without pts, shm, fd, mqueue,
// the console and FIFOs.
func HostDevices() ([]specs.LinuxDevice, error) {
	devs, err := oci.HostDevices()
	if err != nil {
		return nil, fmt.Errorf("listing the host's devices: %w", err)
	}
	return devs, nil
}
