package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/registry"
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

// ImageNeedsPull tells whether container c's image is to be pulled before
// it starts: always under policy Always, when it is not present under
// IfNotPresent, never under Never (StartContainer then says the image is
// missing). from is the containerd namespace the image was taken from (see
// takeImage), "" when staticlet's own had it or none was looked for.
func (r *Runtime) ImageNeedsPull(ctx context.Context, c *v1.Container) (need bool, from string, err error) {
	name, err := normalizeRef(c.Image)
	if err != nil {
		return false, "", err
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways:
		return true, "", nil
	case v1.PullNever:
		return false, "", nil
	}
	if r.images.known(name) {
		// StartContainer looks it up anyway, and pulls it should it have
		// gone meanwhile: no second lookup on every restart.
		return false, "", nil
	}
	_, from, err = r.presentImage(ctx, name)
	switch {
	case err == nil:
		return false, from, nil
	case errdefs.IsNotFound(err):
		return true, "", nil
	default:
		return false, "", fmt.Errorf("looking up image %s: %w", c.Image, err)
	}
}

// PullImage pulls container c's image, joining a pull of it in flight. When
// the pull fails under policy Always but an image of that name is present,
// in staticlet's namespace or another of Config.ImageNamespaces, it
// returns the error with present set: the container may run what the node
// has (an air-gapped node keeps running its pods).
func (r *Runtime) PullImage(ctx context.Context, c *v1.Container) (present bool, err error) {
	name, err := normalizeRef(c.Image)
	if err != nil {
		return false, err
	}
	_, err = r.pull(ctx, name)
	if err == nil {
		return false, nil
	}
	err = &pod.WaitingError{Reason: "ErrImagePull", Err: fmt.Errorf("pulling image %q: %w", c.Image, err)}
	if c.ImagePullPolicy == v1.PullAlways {
		if _, _, lerr := r.nodeImage(ctx, name); lerr == nil {
			return true, err
		}
	}
	return false, err
}

// resolveImage finds ref in containerd and makes sure it is unpacked for
// the snapshotter. An image already present is used whatever the policy
// (PullImage has run before, as policy said), also one present in another
// of Config.ImageNamespaces, which is taken from it; a missing one is
// pulled, unless policy is Never.
func (r *Runtime) resolveImage(ctx context.Context, ref string, policy v1.PullPolicy) (*resolvedImage, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return nil, err
	}
	img, _, err := r.presentImage(ctx, name)
	switch {
	case err == nil:
	case !errdefs.IsNotFound(err):
		return nil, fmt.Errorf("looking up image %s: %w", ref, err)
	case policy == v1.PullNever:
		return nil, &pod.WaitingError{Reason: "ErrImageNeverPull",
			Err: fmt.Errorf("container image %q is not present with pull policy of Never", ref)}
	default:
		if img, err = r.pull(ctx, name); err != nil {
			return nil, &pod.WaitingError{Reason: "ErrImagePull", Err: fmt.Errorf("pulling image %q: %w", ref, err)}
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
		uctx, release, err := r.withLease(ctx, "unpack")
		if err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w", ref, err)
		}
		err = img.Unpack(uctx, r.cfg.Snapshotter)
		release()
		if err != nil {
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

// presentImage finds image name on the node, without a registry: as
// nodeImage does, and again once the image files being imported are in
// (one of them may hold it). from is as nodeImage's.
func (r *Runtime) presentImage(ctx context.Context, name string) (img client.Image, from string, err error) {
	img, from, err = r.nodeImage(ctx, name)
	if errdefs.IsNotFound(err) && r.awaitImports(ctx) {
		img, from, err = r.nodeImage(ctx, name)
	}
	return img, from, err
}

// nodeImage finds image name in staticlet's namespace, else takes it from
// another of Config.ImageNamespaces; from is the namespace it was taken
// from, "" when staticlet's had it.
func (r *Runtime) nodeImage(ctx context.Context, name string) (img client.Image, from string, err error) {
	img, err = r.localImage(ctx, name)
	if !errdefs.IsNotFound(err) || len(r.cfg.ImageNamespaces) == 0 {
		return img, "", err
	}
	if img, err = r.takeImage(ctx, name); err != nil {
		return nil, "", err
	}
	return img, strings.TrimPrefix(img.Labels()[LabelImageSource], SourceNamespacePrefix), nil
}

// awaitImports waits, at most pullTimeout, for the image files being
// imported; it reports whether there were any.
func (r *Runtime) awaitImports(ctx context.Context) bool {
	if r.cfg.AwaitImports == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	return r.cfg.AwaitImports(ctx)
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

// known tells whether an image of name has been resolved before.
func (c *imageCache) known(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.byName {
		if strings.HasPrefix(key, name+"@") {
			return true
		}
	}
	return false
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
	return r.pulls.do(ctx, name, func(ctx context.Context) (img client.Image, err error) {
		// pullTimeout, not the shorter per-call deadline: a big image
		// takes a while.
		ctx, cancel := context.WithTimeout(r.nsContext(ctx), pullTimeout)
		defer cancel()
		if r.cfg.Pulled != nil {
			began := time.Now()
			defer func() { r.cfg.Pulled(time.Since(began), err) }()
		}
		// Credentials and hosts are read again for every pull, so that a
		// fixed file counts at the next retry.
		resolver, err := registry.NewResolver(ctx, r.registry)
		if err != nil {
			return nil, err
		}
		ctx, release, err := r.withLease(ctx, "pull")
		if err != nil {
			return nil, err
		}
		defer release()
		return r.client.Pull(ctx, name, client.WithResolver(resolver), client.WithPullUnpack,
			client.WithPullSnapshotter(r.cfg.Snapshotter), client.WithPullLabel(LabelImageSource, ImageSourcePull))
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
