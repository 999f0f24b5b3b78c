package status

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Image sources, as the runtime labels images.
const (
	SourcePull         = "pull"
	SourceImportPrefix = "import:"
	// SourceNamespacePrefix, then a containerd namespace's name: taken
	// from that namespace (k8s.io, where kubeadm and crictl pull).
	SourceNamespacePrefix = "namespace:"
)

// Image is an image in staticlet's containerd namespace.
type Image struct {
	Name string `json:"name"`
	// ID is the digest of its manifest.
	ID   string `json:"id"`
	Size int64  `json:"size"`
	// Source is where staticlet got it: SourcePull, SourceImportPrefix and
	// the file name, SourceNamespacePrefix and the containerd namespace,
	// or empty when staticlet did not get it itself.
	Source  string    `json:"source,omitempty"`
	Created time.Time `json:"created,omitzero"`
	// LastUsed is when a container last used it, as image garbage
	// collection last recorded; zero when never seen used.
	LastUsed time.Time `json:"lastUsed,omitzero"`
	// Kept are the reasons garbage collection keeps it whatever its age
	// and the disk's usage ("in use", "manifest", "import file"); none
	// when it may be removed.
	Kept []string `json:"kept,omitempty"`
}

// ImportFile is the result of one file of the image import directory.
type ImportFile struct {
	Path string `json:"path"`
	// Digest is the sha256 of the file's content.
	Digest string   `json:"digest,omitempty"`
	Images []string `json:"images,omitempty"`
	// Time is when it was imported, or when it failed.
	Time  time.Time `json:"time,omitzero"`
	Error string    `json:"error,omitempty"`
	// Earlier is the file the same content was imported from before, when
	// it was not imported again for this one.
	Earlier string `json:"earlier,omitempty"`
}

// ImageList is the answer of GET /images.
type ImageList struct {
	Images  []Image      `json:"images"`
	Imports []ImportFile `json:"imports"`
}

// ImageLister lists the images of the runtime.
type ImageLister func(ctx context.Context) ([]Image, error)

// SetImports replaces the results of the image import directory. The store
// keeps a copy.
func (s *Store) SetImports(files []ImportFile) {
	c := cloneImports(files)
	s.mu.Lock()
	s.imports = c
	s.mu.Unlock()
	s.notify()
}

// Imports returns a copy of the results of the image import directory,
// never nil.
func (s *Store) Imports() []ImportFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneImports(s.imports)
}

func cloneImports(files []ImportFile) []ImportFile {
	out := make([]ImportFile, len(files))
	for i, f := range files {
		f.Images = slices.Clone(f.Images)
		out[i] = f
	}
	return out
}

func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	list := ImageList{Images: []Image{}, Imports: s.cfg.Store.Imports()}
	if s.cfg.Images != nil {
		imgs, err := s.cfg.Images(r.Context())
		if err != nil {
			s.writeError(w, r, http.StatusServiceUnavailable, "listing images: %v", err)
			return
		}
		list.Images = imgs
	}
	s.writeJSON(w, r, http.StatusOK, list)
}

// Images returns the images in containerd and the results of the image
// import directory.
func (c *Client) Images(ctx context.Context) (*ImageList, error) {
	var list ImageList
	if err := c.getJSON(ctx, "/images", &list); err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return &list, nil
}
