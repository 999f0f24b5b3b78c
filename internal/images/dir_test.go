package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeImporter stands in for containerd: an "archive" is text naming its
// images ("images: a,b"), or an OCI layout tar whose index.json holds that
// text; anything else fails, as a corrupt archive does.
type fakeImporter struct {
	mu      sync.Mutex
	calls   []string // sources, in order
	present map[string]bool
}

func newFakeImporter() *fakeImporter { return &fakeImporter{present: map[string]bool{}} }

func (f *fakeImporter) ImportArchive(_ context.Context, r io.Reader, source string) ([]string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, source)
	f.mu.Unlock()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	text := string(b)
	if tr := tar.NewReader(strings.NewReader(text)); !strings.HasPrefix(text, "images:") {
		text = ""
		for {
			hdr, err := tr.Next()
			if err != nil {
				break
			}
			if hdr.Name == "index.json" {
				b, _ := io.ReadAll(tr)
				text = string(b)
			}
		}
	}
	list, ok := strings.CutPrefix(strings.TrimSpace(text), "images: ")
	if !ok {
		return nil, fmt.Errorf("importing %s: unexpected EOF", source)
	}
	names := strings.Split(list, ",")
	f.mu.Lock()
	for _, n := range names {
		f.present[n] = true
	}
	f.mu.Unlock()
	return names, nil
}

func (f *fakeImporter) HasImage(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.present[name], nil
}

func (f *fakeImporter) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.present, name)
}

func (f *fakeImporter) imports() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// running is a Dir running in a test, with its updates.
type running struct {
	t       *testing.T
	dir     *Dir
	updates chan Update
}

func start(t *testing.T, path, state string, imp Importer) *running {
	t.Helper()
	d := New(Config{Path: path, StateFile: state, Importer: imp, Settle: 20 * time.Millisecond, Resync: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan Update)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, updates) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &running{t: t, dir: d, updates: updates}
}

// next waits for the next update.
func (r *running) next() Update {
	r.t.Helper()
	select {
	case u := <-r.updates:
		return u
	case <-time.After(30 * time.Second):
		r.t.Fatal("no update from the import directory")
		return Update{}
	}
}

// until waits for an update that cond accepts.
func (r *running) until(what string, cond func(Update) bool) Update {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case u := <-r.updates:
			if cond(u) {
				return u
			}
		case <-deadline:
			r.t.Fatalf("no update with %s", what)
		}
	}
}

func writeAtomic(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func result(u Update, name string) (FileResult, bool) {
	for _, r := range u.Files {
		if filepath.Base(r.Path) == name {
			return r, true
		}
	}
	return FileResult{}, false
}

// setup returns an import directory, a state file path and an importer.
func setup(t *testing.T) (path, state string, imp *fakeImporter) {
	t.Helper()
	root := t.TempDir()
	path = filepath.Join(root, "images")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path, filepath.Join(root, "imported.json"), newFakeImporter()
}

func TestDirImportsOnce(t *testing.T) {
	path, state, imp := setup(t)
	writeAtomic(t, path, "at-start.tar", "images: localhost/a:v1")

	r := start(t, path, state, imp)
	// The file present at start is imported before anything waiting on
	// imports goes on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !r.dir.AwaitIdle(ctx) && len(imp.imports()) == 0 {
		t.Fatal("AwaitIdle returned before the first listing without waiting")
	}
	if got := imp.imports(); !slices.Equal(got, []string{"at-start.tar"}) {
		t.Fatalf("imports once AwaitIdle returned = %v, want [at-start.tar]", got)
	}
	u := r.next()
	if len(u.Done) != 1 || !slices.Equal(u.Done[0].Images, []string{"localhost/a:v1"}) || u.Done[0].Error != "" {
		t.Fatalf("first update Done = %+v, want at-start.tar imported", u.Done)
	}

	// A new file, renamed into place, then a plain write.
	writeAtomic(t, path, "b.tar.gz", "images: localhost/b:v1,localhost/b:v2")
	u = r.until("b.tar.gz imported", func(u Update) bool { return len(u.Done) > 0 })
	if d := u.Done[0]; filepath.Base(d.Path) != "b.tar.gz" || len(d.Images) != 2 || !strings.HasPrefix(d.Digest, "sha256:") {
		t.Fatalf("Done = %+v, want b.tar.gz with two images", u.Done)
	}
	if err := os.WriteFile(filepath.Join(path, "c.tar"), []byte("images: localhost/c:v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.until("c.tar imported", func(u Update) bool { return len(u.Done) == 1 && filepath.Base(u.Done[0].Path) == "c.tar" })

	// The same content under another name, and rewritten under its own
	// name: no import.
	writeAtomic(t, path, "copy.tar.gz", "images: localhost/b:v1,localhost/b:v2")
	u = r.until("the copy listed", func(u Update) bool { _, ok := result(u, "copy.tar.gz"); return ok })
	if c, _ := result(u, "copy.tar.gz"); c.Earlier != "b.tar.gz" || len(c.Images) != 2 || len(u.Done) != 0 {
		t.Errorf("copy = %+v, Done = %+v, want it known as b.tar.gz's images and nothing done", c, u.Done)
	}
	writeAtomic(t, path, "b.tar.gz", "images: localhost/b:v1,localhost/b:v2")
	// A corrupt file after it, to know the rewrite has been listed.
	writeAtomic(t, path, "bad.tar", "not an archive")
	u = r.until("bad.tar failed", func(u Update) bool { return len(u.Done) > 0 })
	if len(u.Done) != 1 || filepath.Base(u.Done[0].Path) != "bad.tar" || !strings.Contains(u.Done[0].Error, "unexpected EOF") {
		t.Fatalf("Done = %+v, want only bad.tar, failed", u.Done)
	}
	if bad, _ := result(u, "bad.tar"); bad.Error == "" {
		t.Errorf("Files has bad.tar as %+v, want its error", bad)
	}
	want := []string{"at-start.tar", "b.tar.gz", "c.tar", "bad.tar"}
	if got := imp.imports(); !slices.Equal(got, want) {
		t.Errorf("imports = %v, want %v", got, want)
	}

	// Removing a file drops its result.
	if err := os.Remove(filepath.Join(path, "c.tar")); err != nil {
		t.Fatal(err)
	}
	r.until("c.tar gone", func(u Update) bool { _, ok := result(u, "c.tar"); return !ok })
}

// TestDirRestart: a restarted Dir imports nothing it imported before,
// unless the images went from the runtime meanwhile.
func TestDirRestart(t *testing.T) {
	path, state, imp := setup(t)
	writeAtomic(t, path, "a.tar", "images: localhost/a:v1")
	writeAtomic(t, path, "b.tar", "images: localhost/b:v1")

	func() {
		ctx, cancel := context.WithCancel(context.Background())
		d := New(Config{Path: path, StateFile: state, Importer: imp, Settle: 20 * time.Millisecond})
		updates := make(chan Update, 1)
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx, updates) }()
		<-updates
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}()
	imp.remove("localhost/b:v1")

	r := start(t, path, state, imp)
	u := r.next()
	if len(u.Done) != 1 || filepath.Base(u.Done[0].Path) != "b.tar" {
		t.Errorf("after the restart Done = %+v, want only b.tar, whose image went", u.Done)
	}
	if a, _ := result(u, "a.tar"); !slices.Equal(a.Images, []string{"localhost/a:v1"}) || a.Time.IsZero() {
		t.Errorf("after the restart a.tar = %+v, want its image and import time from the records", a)
	}
	want := []string{"a.tar", "b.tar", "b.tar"}
	if got := imp.imports(); !slices.Equal(got, want) {
		t.Errorf("imports = %v, want %v", got, want)
	}
}

// TestDirLayout imports an OCI layout directory as a tar stream, and a
// directory that is no layout fails.
func TestDirLayout(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "images")
	layout := filepath.Join(path, "layout")
	if err := os.MkdirAll(filepath.Join(layout, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"oci-layout":             `{"imageLayoutVersion":"1.0.0"}`,
		"index.json":             "images: localhost/layout:v1",
		"blobs/sha256/0123abcd":  "blob",
		"../not-a-layout/readme": "hello",
	} {
		p := filepath.Join(layout, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	imp := newFakeImporter()
	r := start(t, path, "", imp)
	u := r.next()
	l, _ := result(u, "layout")
	if !slices.Equal(l.Images, []string{"localhost/layout:v1"}) || l.Error != "" {
		t.Errorf("layout = %+v, want its image", l)
	}
	if n, _ := result(u, "not-a-layout"); !strings.Contains(n.Error, "not an OCI image layout") {
		t.Errorf("not-a-layout = %+v, want an error saying it is no layout", n)
	}
	st, err := stampOf(layout)
	if err != nil {
		t.Fatal(err)
	}
	d1, err1 := digestOf(layout, st)
	d2, err2 := digestOf(layout, st)
	if err := errors.Join(err1, err2); err != nil || d1 != d2 || d1 != l.Digest {
		t.Errorf("digestOf(layout) = %s, %s (%v), want both %s", d1, d2, err, l.Digest)
	}
}

func TestIgnored(t *testing.T) {
	for name, want := range map[string]bool{
		"busybox.tar.gz": false, "etcd.tar.zst": false, "layout": false,
		".busybox.tar.gz.tmp": true, ".hidden": true, "x.tar~": true, "x.tar.part": true, "x.tmp": true,
	} {
		if got := ignored(name); got != want {
			t.Errorf("ignored(%q) = %v, want %v", name, got, want)
		}
	}
}
