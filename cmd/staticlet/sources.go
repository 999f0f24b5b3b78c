package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/watch"
)

// manifestSource is a watch source as the daemon runs it.
type manifestSource interface {
	Name() string
	Run(ctx context.Context, out chan<- watch.Snapshot) error
}

// manifestSources builds the sources the flags ask for: the manifest
// directory, always, and the manifest URL when one is given.
func manifestSources(cfg runConfig, logger *slog.Logger) ([]manifestSource, error) {
	dir := watch.NewDir(watch.DirConfig{
		Path:   cfg.manifestDir,
		Resync: cfg.fileCheckFrequency,
		// A new or rewritten file is applied 10 ms after its last event; a
		// burst that removes or renames a file waits 50 ms, time enough for
		// an editor's rename-then-write to finish.
		QuietDebounce: 10 * time.Millisecond,
		Debounce:      50 * time.Millisecond,
		Decode: func(path string, data []byte) ([]*pod.Pod, error) {
			return pod.Decode(path, data, pod.Options{NodeName: cfg.nodeName, SourceKind: pod.SourceFile, Seen: time.Now()})
		},
		Logger: logger,
	})
	sources := []manifestSource{dir}
	if cfg.manifestURL == "" {
		return sources, nil
	}
	header, err := parseURLHeaders(cfg.manifestURLHeaders)
	if err != nil {
		return nil, err
	}
	u, err := watch.NewURL(watch.URLConfig{
		URL:    cfg.manifestURL,
		Header: header,
		Period: cfg.httpCheckFrequency,
		CAFile: cfg.manifestURLCA,
		// The last good body, so a restart while the URL is down keeps its pods.
		CacheFile: filepath.Join(cfg.rootDir, "sources", fmt.Sprintf("url-%x.yaml", sha256.Sum256([]byte(cfg.manifestURL)))),
		Decode: func(path string, data []byte) ([]*pod.Pod, error) {
			return pod.Decode(path, data, pod.Options{
				NodeName: cfg.nodeName, SourceKind: pod.SourceHTTP, Seen: time.Now(), AllowEmptyList: true,
			})
		},
		Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("--manifest-url: %w", err)
	}
	return append(sources, u), nil
}

// parseURLHeaders parses --manifest-url-header values, "Name:Value" each.
// Errors name the header but never show its value.
func parseURLHeaders(values []string) (http.Header, error) {
	h := http.Header{}
	for _, v := range values {
		name, value, ok := strings.Cut(v, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
			return nil, fmt.Errorf("--manifest-url-header %q...: want Name:Value", name)
		}
		if strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("--manifest-url-header %s: the value holds a line break", name)
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
	}
	return h, nil
}

// merge combines the latest snapshot of every source into desired sets for
// the reconciler and manifest results for the status API. It sends the
// first desired set only once every source in sources has reported, so
// that no pod is stopped because its source has not been read yet; after
// that, a desired set not yet taken is replaced by a newer one.
func merge(ctx context.Context, in <-chan watch.Snapshot, sources []string, out chan<- []*pod.Pod, store *status.Store, logger *slog.Logger) error {
	latest := make(map[string]watch.Snapshot, len(sources))
	// The sources log their own file errors; duplicates appear only here.
	logged := map[string]bool{}
	var pending []*pod.Pod
	havePending := false
	for {
		var send chan<- []*pod.Pod
		if havePending {
			send = out
		}
		var snap watch.Snapshot
		select {
		case <-ctx.Done():
			return nil
		case send <- pending:
			pending, havePending = nil, false
			continue
		case snap = <-in:
		}
		latest[snap.Source] = snap
		snaps := make([]watch.Snapshot, 0, len(latest))
		for _, s := range latest {
			snaps = append(snaps, s)
		}
		slices.SortFunc(snaps, func(a, b watch.Snapshot) int { return strings.Compare(a.Source, b.Source) })
		pods, files := watch.Merge(snaps)
		logged = logDuplicates(files, logged, logger)
		store.SetManifests(manifestResults(snaps, files))
		logger.Debug("manifests read", "source", snap.Source, "files", len(snap.Files), "pods", len(pods))
		if len(latest) < len(sources) {
			continue // a source has not reported yet
		}
		pending, havePending = pods, true
	}
}

// logDuplicates logs each definition Merge ignored, once while it lasts, and
// returns the set to pass next time.
func logDuplicates(files []watch.FileResult, logged map[string]bool, logger *slog.Logger) map[string]bool {
	dups := map[string]bool{}
	for _, f := range files {
		var de *watch.DuplicateError
		if errors.As(f.Err, &de) {
			msg := f.Path + ": " + f.Err.Error()
			dups[msg] = true
			if !logged[msg] {
				logger.Warn("manifest ignored", "path", f.Path, "err", f.Err)
			}
		}
	}
	return dups
}

// manifestResults turns merged results into the status API's, source by
// source (sorted by name): the source's own error first, then its files.
func manifestResults(snaps []watch.Snapshot, files []watch.FileResult) []status.Manifest {
	sourceOf := map[string]string{} // path -> source
	for _, s := range snaps {
		for _, f := range s.Files {
			sourceOf[f.Path] = s.Source
		}
	}
	ms := make([]status.Manifest, 0, len(files)+len(snaps))
	for _, s := range snaps {
		if s.Err != nil {
			ms = append(ms, status.Manifest{Source: s.Source, Error: s.Err.Error()})
		}
		for _, f := range files {
			if sourceOf[f.Path] != s.Source {
				continue
			}
			m := status.Manifest{Source: s.Source, Path: f.Path, LastSuccess: f.LastSuccess}
			for _, p := range f.Pods {
				m.Pods = append(m.Pods, p.Key().String())
			}
			if f.Err != nil {
				m.Error = f.Err.Error()
			}
			ms = append(ms, m)
		}
	}
	return ms
}
