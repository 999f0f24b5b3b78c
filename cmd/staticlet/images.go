package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// importStateFile, under --root-dir, records the image files imported.
const importStateFile = "image-imports.json"

// imageImporter is the image store as the import directory uses it: the
// names of what an archive held.
type imageImporter struct{ store *images.Store }

func (i imageImporter) ImportArchive(ctx context.Context, r io.Reader, source string) ([]string, error) {
	imgs, err := i.store.ImportArchive(ctx, r, source)
	names := make([]string, len(imgs))
	for j, img := range imgs {
		names[j] = img.Name
	}
	return names, err
}

func (i imageImporter) HasImage(ctx context.Context, name string) (bool, error) {
	return i.store.HasImage(ctx, name)
}

// imageLister lists the store's images for the status socket, with when
// each was last used and why garbage collection keeps it.
func imageLister(gc *images.GC) status.ImageLister {
	return func(ctx context.Context) ([]status.Image, error) {
		imgs, err := gc.Images(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]status.Image, len(imgs))
		for i, img := range imgs {
			out[i] = status.Image{Name: img.Name, ID: img.Digest, Size: img.Size, Source: img.Source, Created: img.Created,
				LastUsed: img.LastUsed, Kept: img.Kept}
		}
		return out, nil
	}
}

// importSinks are where the import directory's results go.
type importSinks struct {
	store *status.Store
	rep   reporter
	gc    *images.GC // keeps the images of the files present
}

// reportImports hands the import directory's results to the status store
// and to image garbage collection, makes an event of each file imported
// or failed, and tells the reconciler which images arrived, until ctx ends.
func reportImports(ctx context.Context, updates <-chan images.Update, to importSinks, arrived chan<- []string) error {
	store, rep := to.store, to.rep
	for {
		var u images.Update
		select {
		case <-ctx.Done():
			return nil
		case u = <-updates:
		}
		files := make([]status.ImportFile, len(u.Files))
		for i, f := range u.Files {
			files[i] = status.ImportFile{Path: f.Path, Digest: f.Digest, Images: f.Images, Time: f.Time, Error: f.Error, Earlier: f.Earlier}
		}
		store.SetImports(files)
		to.gc.SetImportFiles(u.Files)
		var names []string
		for _, f := range u.Done {
			rep.metrics.ImageImported(f.Error != "")
			rep.Event(importEvent(f))
			names = append(names, f.Images...)
		}
		if len(names) == 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case arrived <- names:
		}
	}
}

// importEvent is the event of a file imported (Normal Imported) or failed
// (Warning ImportFailed); it belongs to no pod.
func importEvent(f images.FileResult) pod.Event {
	file := filepath.Base(f.Path)
	if f.Error != "" {
		return pod.Event{Time: eventTime(f.Time), Type: pod.EventWarning, Reason: "ImportFailed",
			Message: fmt.Sprintf("Failed to import image file %s: %s", file, f.Error)}
	}
	return pod.Event{Time: eventTime(f.Time), Type: pod.EventNormal, Reason: "Imported",
		Message: fmt.Sprintf("Imported %s from image file %s", strings.Join(f.Images, ", "), file)}
}

func eventTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
