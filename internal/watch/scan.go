package watch

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/staticlet/staticlet/internal/pod"
)

// fileState is what the directory source remembers about one file between
// listings: enough to skip an unchanged file and to keep its last good pods.
type fileState struct {
	fp      fingerprint // the file as it was at the last read; zero forces a read
	sum     [sha256.Size]byte
	haveSum bool       // sum is the content last given to the decoder
	gen     uint64     // unique across the source; changes whenever the result does
	good    []*pod.Pod // pods from the last content that decoded
	objects []*pod.Object
	// reads says that the last good content reads other files (a
	// Secret's staticlet.io/secret-files): it is decoded again at every
	// listing, even unchanged, so that a new value of those is seen.
	reads bool
	err   error // why the current content is rejected; nil when good
}

// ignored reports whether a directory entry is not a manifest: hidden files
// (as the kubelet) and the leftovers of editors and package managers, which
// would otherwise define the same pods twice or half-written ones.
func ignored(name string) bool {
	switch {
	case strings.HasPrefix(name, "."), // hidden, and vim's .name.swp
		strings.HasSuffix(name, "~"), // emacs and vim backups
		strings.HasSuffix(name, ".swp"), strings.HasSuffix(name, ".swx"),
		name == "4913", // vim's probe for a writable directory
		strings.HasSuffix(name, ".tmp"),
		strings.Contains(name, ".dpkg-"): // .dpkg-old, -new, -dist, -tmp
		return true
	}
	return false
}

// scan lists the source and reads what changed, and returns the whole view.
// Only the Run goroutine calls it.
func (d *Dir) scan() Snapshot {
	snap := Snapshot{Source: d.name}
	var paths []string
	info, err := os.Stat(d.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		clear(d.files)
		snap.Err = d.missing()
		return snap
	case err != nil:
		// Not knowing is not the same as gone: keep the previous files.
		snap.Err = fmt.Errorf("reading manifest path: %w", err)
		snap.Files = d.results()
		return snap
	case info.IsDir():
		d.isFile = false
		entries, err := os.ReadDir(d.path)
		if err != nil {
			snap.Err = fmt.Errorf("listing manifest directory: %w", err)
			snap.Files = d.results()
			return snap
		}
		for _, e := range entries {
			// Subdirectories are not manifests (no recursion, as the kubelet).
			// Symlinks are resolved by update.
			if e.IsDir() || ignored(e.Name()) {
				continue
			}
			paths = append(paths, filepath.Join(d.path, e.Name()))
		}
	case info.Mode().IsRegular():
		// A single manifest file: the user named it, so no name is ignored.
		d.isFile = true
		paths = []string{d.path}
	default:
		clear(d.files)
		snap.Err = fmt.Errorf("manifest path %s is neither a directory nor a regular file", d.path)
		return snap
	}

	present := make(map[string]bool, len(paths))
	for _, p := range paths {
		if d.update(p) {
			present[p] = true
		}
	}
	for p := range d.files {
		if !present[p] {
			delete(d.files, p)
		}
	}
	snap.Files = d.results()
	return snap
}

// update brings the state of the file at p up to date and reports whether p
// is a manifest file at all (a regular file, or a symlink to one).
func (d *Dir) update(p string) bool {
	info, statErr := os.Stat(p)
	if errors.Is(statErr, fs.ErrNotExist) {
		return false // removed since the listing, or a dangling symlink
	}
	if statErr == nil && !info.Mode().IsRegular() {
		return false // a directory behind a symlink, a fifo, a socket...
	}
	st := d.files[p]
	if st == nil {
		st = &fileState{}
		d.files[p] = st
	}
	if statErr != nil {
		st.fp, st.haveSum = fingerprint{}, false
		d.reject(p, st, statErr)
		return true
	}
	if fp := fingerprintOf(info); fp != (fingerprint{}) && fp == st.fp {
		return true // not touched since the last read: keep the result without reading
	}

	data, fp, err := readLimited(p, d.cfg.MaxFileSize)
	st.fp = fp
	if err != nil {
		// The content was not judged: once readable, decode it again even if
		// it turns out unchanged, so that this error is replaced.
		st.haveSum = false
		d.reject(p, st, err)
		return true
	}
	sum := sha256.Sum256(data)
	if st.haveSum && sum == st.sum && !(st.err == nil && st.reads) {
		return true // touched but not changed: the decoded result still holds
	}
	st.sum, st.haveSum = sum, true
	m, err := d.cfg.Decode(p, data)
	if err != nil {
		d.reject(p, st, err)
		return true
	}
	if st.err != nil {
		d.log.Info("manifest file accepted again", "path", p, "pods", len(m.Pods))
	}
	st.good, st.objects, st.reads, st.err = m.Pods, m.Objects, m.ReadsFiles(), nil
	st.gen = d.nextGen()
	return true
}

// reject records that the content of p cannot be used, keeping the last good
// pods. An error seen before (same message) changes nothing and is not
// logged again, so a resync of a broken file is silent.
func (d *Dir) reject(p string, st *fileState, err error) {
	if st.err != nil && st.err.Error() == err.Error() {
		return
	}
	st.err = err
	st.gen = d.nextGen()
	d.log.Warn("manifest file rejected", "path", p, "err", err, "keeping_pods", len(st.good))
}

func (d *Dir) nextGen() uint64 {
	d.gen++
	return d.gen
}

// results returns the current per-file results, sorted by path.
func (d *Dir) results() []FileResult {
	files := make([]FileResult, 0, len(d.files))
	for p, st := range d.files {
		files = append(files, FileResult{Path: p, Pods: st.good, Objects: st.objects, Err: st.err})
	}
	slices.SortFunc(files, func(a, b FileResult) int { return cmp.Compare(a.Path, b.Path) })
	return files
}

// version returns what identifies the current view for change detection:
// each file's path and generation, and the source error. Generations are
// unique per result, so equal versions mean equal snapshots.
func (d *Dir) version(snap Snapshot) snapVersion {
	v := snapVersion{files: make([]fileVersion, len(snap.Files))}
	for i, f := range snap.Files {
		v.files[i] = fileVersion{path: f.Path, gen: d.files[f.Path].gen}
	}
	if snap.Err != nil {
		v.err = snap.Err.Error()
	}
	return v
}

type snapVersion struct {
	files []fileVersion
	err   string
}

type fileVersion struct {
	path string
	gen  uint64
}

func (v snapVersion) equal(w snapVersion) bool {
	return v.err == w.err && slices.Equal(v.files, w.files)
}

// readLimited reads the regular file at p, refusing one over max bytes without
// reading it. It returns the fingerprint of the file as opened, taken before
// reading so that a write during the read shows as a change next time; the
// fingerprint is zero (forcing a retry) when the failure may be transient.
func readLimited(p string, max int64) ([]byte, fingerprint, error) {
	// O_NONBLOCK: if the file was swapped for a fifo since it was checked,
	// opening it must not hang the source. It has no effect on regular files.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fingerprint{}, fmt.Errorf("opening manifest: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fingerprint{}, fmt.Errorf("reading manifest: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fingerprint{}, fmt.Errorf("reading manifest %s: not a regular file", p)
	}
	fp := fingerprintOf(info)
	if info.Size() > max {
		return nil, fp, fmt.Errorf("file is %d bytes, over the %d-byte limit", info.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fingerprint{}, fmt.Errorf("reading manifest: %w", err)
	}
	if int64(len(data)) > max {
		// It grew after the stat; its fingerprint will differ next time.
		return nil, fp, fmt.Errorf("file is over the %d-byte limit", max)
	}
	return data, fp, nil
}
