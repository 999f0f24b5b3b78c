package images

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
)

// importTimeout bounds importing and unpacking one archive, which may be
// large and is read from a local disk.
const importTimeout = 10 * time.Minute

// SourceImportPrefix starts the LabelSource of an imported image; the
// archive's file name follows.
const SourceImportPrefix = "import:"

// Imported is one image an archive held, as containerd now has it.
type Imported struct {
	// Name is the image's full name, as a manifest's image normalizes to.
	Name string
	// Digest is the digest of its manifest (or index).
	Digest string
}

// Info describes an image in staticlet's containerd namespace.
type Info struct {
	Name   string
	Digest string
	// Size is the size of its content for this platform, compressed.
	Size int64
	// Source is its LabelSource; empty when staticlet did not label it.
	Source  string
	Created time.Time
	// LastUsed is its LabelLastUsed: when a container last used it, as
	// image garbage collection last saw; zero when never seen used.
	LastUsed time.Time
}

// ImportArchive imports the images of an archive into containerd and
// unpacks them for the snapshotter. The archive is a docker save tar or an
// OCI image layout tar, plain or compressed with gzip or zstd (detected from
// its first bytes). Each image is labelled as imported from source, a file
// name. Image names are normalized as a manifest's image is: a docker save
// RepoTag by containerd, and an OCI index's io.containerd.image.name or
// org.opencontainers.image.ref.name here; a ref.name that is only a tag
// names no image. An archive that names no image is an error.
func (s *Store) ImportArchive(ctx context.Context, rd io.Reader, source string) ([]Imported, error) {
	stream, err := compression.DecompressStream(rd)
	if err != nil {
		return nil, fmt.Errorf("importing %s: detecting its compression: %w", source, err)
	}
	defer stream.Close()
	ctx, cancel := context.WithTimeout(s.nsContext(ctx), importTimeout)
	defer cancel()
	ctx, release, err := s.site.Leases.With(ctx, "import")
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", source, err)
	}
	defer release()
	labels := map[string]string{LabelSource: SourceImportPrefix + source}
	imgs, err := s.site.Client.Import(ctx, stream,
		client.WithImageRefTranslator(ociRefName),
		client.WithImageLabels(labels))
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", source, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("importing %s: the archive names no image (an OCI index needs "+
			"io.containerd.image.name or a full org.opencontainers.image.ref.name)", source)
	}
	var out []Imported
	for _, img := range imgs {
		img, err := s.normalizeImported(ctx, img)
		if err != nil {
			return nil, fmt.Errorf("importing %s: %w", source, err)
		}
		if err := client.NewImage(s.site.Client, img).Unpack(ctx, s.site.Snapshotter); err != nil {
			return nil, fmt.Errorf("importing %s: unpacking image %s: %w", source, img.Name, err)
		}
		out = append(out, Imported{Name: img.Name, Digest: img.Target.Digest.String()})
	}
	slices.SortFunc(out, func(a, b Imported) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Imported) bool { return a.Name == b.Name }), nil
}

// ociRefName turns an OCI index's org.opencontainers.image.ref.name into an
// image name. A bare tag ("v1", "latest"), which OCI layouts commonly
// carry, names no image: it gives "".
func ociRefName(ref string) string {
	if !strings.ContainsAny(ref, "/:@") {
		return ""
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ""
	}
	return named.String()
}

// normalizeImported renames img to the name a manifest's image normalizes
// to, when the archive named it otherwise (io.containerd.image.name
// "busybox:1" is stored as it is by containerd).
func (s *Store) normalizeImported(ctx context.Context, img images.Image) (images.Image, error) {
	named, err := reference.ParseDockerRef(img.Name)
	if err != nil {
		return img, fmt.Errorf("image name %q: %w", img.Name, err)
	}
	if named.String() == img.Name {
		return img, nil
	}
	is := s.site.Client.ImageService()
	old := img.Name
	img.Name = named.String()
	updated, err := is.Update(ctx, img, "target", "labels")
	if errdefs.IsNotFound(err) {
		updated, err = is.Create(ctx, img)
	}
	if err != nil {
		return img, fmt.Errorf("naming image %s as %s: %w", old, img.Name, err)
	}
	if err := is.Delete(ctx, old); err != nil && !errdefs.IsNotFound(err) {
		return updated, fmt.Errorf("removing image name %s for %s: %w", old, img.Name, err)
	}
	return updated, nil
}

// HasImage reports whether containerd has an image called name (a full
// name, as ImportArchive returns).
func (s *Store) HasImage(ctx context.Context, name string) (bool, error) {
	_, err := s.localImage(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("looking up image %s: %w", name, err)
	}
}

// ListImages returns the images in staticlet's namespace, sorted by name.
// An image whose size cannot be computed (its content for this platform is
// incomplete) is listed with size 0.
func (s *Store) ListImages(ctx context.Context) ([]Info, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	imgs, err := s.site.Client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	out := make([]Info, 0, len(imgs))
	for _, img := range imgs {
		size, _ := client.NewImage(s.site.Client, img).Size(ctx)
		lastUsed, _ := time.Parse(time.RFC3339, img.Labels[LabelLastUsed]) // zero when absent
		out = append(out, Info{
			Name:     img.Name,
			Digest:   img.Target.Digest.String(),
			Size:     size,
			Source:   img.Labels[LabelSource],
			Created:  img.CreatedAt,
			LastUsed: lastUsed,
		})
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
