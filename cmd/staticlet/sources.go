package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/desired"
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
// directory, always, and the manifest URL when one is given, which tells
// polled of every poll's status code.
func manifestSources(cfg runConfig, logger *slog.Logger, polled func(url string, code int)) ([]manifestSource, error) {
	readData := secretData(os.Getenv("CREDENTIALS_DIRECTORY"))
	dir := watch.NewDir(watch.DirConfig{
		Path:   cfg.dirSource.path,
		Resync: cfg.dirSource.fileCheckFrequency,
		// A new or rewritten file is applied 2 ms after its last event:
		// the events of one write, or of a file renamed into place, come
		// within microseconds, and a writer slower than that is read again
		// at its next write, as the kubelet reads at every event. A burst
		// that removes or renames a file waits 50 ms, time enough for an
		// editor's rename-then-write to finish.
		QuietDebounce: 2 * time.Millisecond,
		Debounce:      50 * time.Millisecond,
		Decode: func(path string, data []byte) (*pod.Manifest, error) {
			return pod.DecodeFile(path, data, pod.Options{NodeName: cfg.nodeName, SourceKind: pod.SourceFile, Seen: time.Now(), ReadData: readData})
		},
		Logger: logger,
	})
	sources := []manifestSource{dir}
	if cfg.urlSource.url == "" {
		return sources, nil
	}
	header, err := parseURLHeaders(cfg.urlSource.headers)
	if err != nil {
		return nil, err
	}
	u, err := watch.NewURL(watch.URLConfig{
		URL:    cfg.urlSource.url,
		Header: header,
		Period: cfg.urlSource.httpCheckFrequency,
		CAFile: cfg.urlSource.caFile,
		// The last good body, so a restart while the URL is down keeps its pods.
		CacheFile: filepath.Join(cfg.rootDir, "sources", fmt.Sprintf("url-%x.yaml", sha256.Sum256([]byte(cfg.urlSource.url)))),
		Decode: func(path string, data []byte) (*pod.Manifest, error) {
			return pod.DecodeFile(path, data, pod.Options{
				NodeName: cfg.nodeName, SourceKind: pod.SourceHTTP, Seen: time.Now(), AllowEmptyList: true, ReadData: readData,
			})
		},
		Polled: polled,
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

// manifestStore is the status store as the merger hands it manifest
// results.
type manifestStore struct{ store *status.Store }

func (m manifestStore) SetManifests(ms []desired.Manifest) {
	out := make([]status.Manifest, len(ms))
	for i, r := range ms {
		// The same fields: a conversion that stops compiling when either
		// type changes.
		out[i] = status.Manifest(r)
	}
	m.store.SetManifests(out)
}

// maxSecretFile is the largest file a Secret's annotations may fill a key
// from: a Secret holds at most 1 MiB in all.
const maxSecretFile = 1 << 20

// secretData reads what a Secret's staticlet.io/secret-files and
// staticlet.io/secret-credentials annotations name: a file of the node, or
// a systemd credential in credDir ($CREDENTIALS_DIRECTORY, which the
// unit's LoadCredential= and LoadCredentialEncrypted= fill). Errors name
// the file, never its content.
func secretData(credDir string) func(pod.DataSource) ([]byte, error) {
	return func(src pod.DataSource) ([]byte, error) {
		path := src.Name
		if src.Credential {
			if credDir == "" {
				return nil, fmt.Errorf("no systemd credential %s: $CREDENTIALS_DIRECTORY is not set (LoadCredential= or LoadCredentialEncrypted= in staticlet's unit sets it)", src.Name)
			}
			path = filepath.Join(credDir, src.Name)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if len(data) > maxSecretFile {
			return nil, fmt.Errorf("%s is larger than %d bytes, the most a Secret holds", path, maxSecretFile)
		}
		return data, nil
	}
}
