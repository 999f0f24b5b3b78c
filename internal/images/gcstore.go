package images

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// LabelLastUsed is on containerd image records: when a container last
// used the image (RFC 3339), as image garbage collection last saw. It lives
// in containerd so that a restarted staticlet knows it.
const LabelLastUsed = "io.staticlet.last-used"

// containerImages returns the names of the images the containers of
// staticlet's namespace were made from, running or not.
func (s *Store) containerImages(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	cs, err := s.site.Client.ContainerService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	used := map[string]bool{}
	for _, c := range cs {
		if c.Image != "" {
			used[c.Image] = true
		}
	}
	return used, nil
}

// markUsed sets LabelLastUsed of image name to at. An image gone
// meanwhile is not an error.
func (s *Store) markUsed(ctx context.Context, name string, at time.Time) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	img := ctrimages.Image{Name: name, Labels: map[string]string{LabelLastUsed: at.UTC().Format(time.RFC3339)}}
	_, err := s.site.Client.ImageService().Update(ctx, img, "labels."+LabelLastUsed)
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("labelling image %s as used: %w", name, err)
	}
	return nil
}

// removeImage removes the image record name if it still points at digest
// (an image pulled again meanwhile under the name stays). With sync,
// containerd collects the content no longer referenced before it returns,
// as its CRI plugin does for the last name of an image. An image gone
// meanwhile is not an error.
func (s *Store) removeImage(ctx context.Context, name, digest string, sync bool) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	is := s.site.Client.ImageService()
	img, err := is.Get(ctx, name)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing image %s: %w", name, err)
	}
	if img.Target.Digest.String() != digest {
		return fmt.Errorf("removing image %s: it now points at %s, not %s", name, img.Target.Digest, digest)
	}
	opts := []ctrimages.DeleteOpt{ctrimages.DeleteTarget(&img.Target)}
	if sync {
		opts = append(opts, ctrimages.SynchronousDelete())
	}
	if err := is.Delete(ctx, name, opts...); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("removing image %s: %w", name, err)
	}
	s.cache.forget(name)
	return nil
}

// imageFSUsage returns the size and free space of the image filesystem.
func (s *Store) imageFSUsage(ctx context.Context) (fsUsage, error) {
	root, err := s.imageFS(ctx)
	if err != nil {
		return fsUsage{}, err
	}
	return statFS(root)
}

// imageFS finds the directory whose filesystem holds the images: the root
// of the snapshotter that unpacks them (what the kubelet's image
// filesystem is, through the CRI), else the root of containerd's content
// store, from what containerd's plugins export.
func (s *Store) imageFS(ctx context.Context) (string, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	is := s.site.Client.IntrospectionService()
	for _, filter := range []string{
		"type==io.containerd.snapshotter.v1,id==" + s.site.Snapshotter,
		"type==io.containerd.content.v1",
	} {
		resp, err := is.Plugins(ctx, filter)
		if err != nil {
			return "", fmt.Errorf("asking containerd where images are: %w", err)
		}
		for _, p := range resp.Plugins {
			if root := p.Exports["root"]; root != "" {
				return root, nil
			}
		}
	}
	return "", errors.New("asking containerd where images are: neither the snapshotter nor the content store exports its root")
}

// statFS returns the size and the space available to unprivileged users
// of the filesystem holding path, as the kubelet's image filesystem
// statistics count them.
func statFS(path string) (fsUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsUsage{}, fmt.Errorf("reading the usage of the filesystem of %s: %w", path, err)
	}
	return fsUsage{Capacity: int64(st.Blocks) * st.Bsize, Available: int64(st.Bavail) * st.Bsize}, nil
}
