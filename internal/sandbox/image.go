package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// pullTimeout bounds one pull, so a registry that never answers cannot hold a
// pod's worker forever.
const pullTimeout = 2 * time.Minute

// resolvedImage is an image ready to run: unpacked, with its config.
type resolvedImage struct {
	image  client.Image
	config spec.ImageConfig
	id     string
	// stopSignal is the image's STOPSIGNAL, empty if it sets none.
	stopSignal string
}

// normalizeRef turns a manifest's image reference into containerd's full
// name, as the kubelet does ("busybox" becomes the library image, tag latest).
func normalizeRef(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", &pod.WaitingError{Reason: "InvalidImageName", Err: fmt.Errorf("image %q: %w", ref, err)}
	}
	return named.String(), nil
}

// resolveImage finds ref in containerd, pulling it as policy says, and makes
// sure it is unpacked for the snapshotter.
func (r *Runtime) resolveImage(ctx context.Context, ref string, policy v1.PullPolicy) (*resolvedImage, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return nil, err
	}
	img, err := r.localImage(ctx, name)
	switch {
	case err == nil && policy != v1.PullAlways:
	case err != nil && !errdefs.IsNotFound(err):
		return nil, fmt.Errorf("looking up image %s: %w", ref, err)
	case policy == v1.PullNever:
		return nil, &pod.WaitingError{Reason: "ErrImageNeverPull",
			Err: fmt.Errorf("container image %q is not present with pull policy of Never", ref)}
	default:
		pulled, perr := r.pull(ctx, name)
		switch {
		case perr == nil:
			img = pulled
		case img != nil:
			// Always, but the registry is out of reach: run what this node
			// already has rather than nothing, and say so.
			r.cfg.Logger.Warn("pull failed; using the image already present", "image", ref, "err", perr)
		default:
			return nil, &pod.WaitingError{Reason: "ErrImagePull", Err: fmt.Errorf("pulling image %q: %w", ref, perr)}
		}
	}
	digest := img.Target().Digest.String()
	if cached, ok := r.images.get(img.Name(), digest); ok {
		return cached, nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	unpacked, err := img.IsUnpacked(ctx, r.cfg.Snapshotter)
	if err != nil {
		return nil, fmt.Errorf("checking image %s is unpacked: %w", ref, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w", ref, err)
		}
	}
	ispec, err := img.Spec(ctx)
	if err != nil {
		return nil, &pod.WaitingError{Reason: "CreateContainerError", Err: fmt.Errorf("reading the config of image %s: %w", ref, err)}
	}
	resolved := &resolvedImage{
		image:      img,
		id:         img.Name() + "@" + digest,
		stopSignal: ispec.Config.StopSignal,
		config: spec.ImageConfig{
			Entrypoint: ispec.Config.Entrypoint,
			Cmd:        ispec.Config.Cmd,
			Env:        ispec.Config.Env,
			WorkingDir: ispec.Config.WorkingDir,
			User:       ispec.Config.User,
		},
	}
	r.images.put(img.Name(), digest, resolved)
	return resolved, nil
}

// imageCache remembers images already checked unpacked and read, by name
// and digest, so that a restart does not read the image's config again. An
// image retagged to another digest misses the cache.
type imageCache struct {
	mu     sync.Mutex
	byName map[string]*resolvedImage // guarded by mu; keyed by name + "@" + digest
}

func (c *imageCache) get(name, digest string) (*resolvedImage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	img, ok := c.byName[name+"@"+digest]
	return img, ok
}

func (c *imageCache) put(name, digest string, img *resolvedImage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil {
		c.byName = map[string]*resolvedImage{}
	}
	c.byName[name+"@"+digest] = img
}

func (r *Runtime) localImage(ctx context.Context, name string) (client.Image, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.client.GetImage(ctx, name)
}

// pull fetches name, joining a pull of the same image already in flight so
// that many pods wanting one image cause one download.
func (r *Runtime) pull(ctx context.Context, name string) (client.Image, error) {
	return r.pulls.do(ctx, name, func(ctx context.Context) (client.Image, error) {
		ctx, cancel := context.WithTimeout(ctx, pullTimeout)
		defer cancel()
		ctx, cancelNS := r.call(ctx)
		defer cancelNS()
		return r.client.Pull(ctx, name, client.WithPullUnpack, client.WithPullSnapshotter(r.cfg.Snapshotter))
	})
}

// pullGroup runs at most one pull per image name at a time.
type pullGroup struct {
	mu       sync.Mutex
	inflight map[string]*pullCall // guarded by mu
}

type pullCall struct {
	done chan struct{}
	img  client.Image
	err  error
}

func newPullGroup() *pullGroup { return &pullGroup{inflight: map[string]*pullCall{}} }

func (g *pullGroup) do(ctx context.Context, name string, fn func(context.Context) (client.Image, error)) (client.Image, error) {
	g.mu.Lock()
	if c, ok := g.inflight[name]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.img, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &pullCall{done: make(chan struct{})}
	g.inflight[name] = c
	g.mu.Unlock()

	// The pull outlives a caller that gives up, for the others waiting on it.
	c.img, c.err = fn(context.WithoutCancel(ctx))
	g.mu.Lock()
	delete(g.inflight, name)
	g.mu.Unlock()
	if c.err == nil && c.img == nil {
		c.err = errors.New("pull returned no image")
	}
	close(c.done)
	return c.img, c.err
}
