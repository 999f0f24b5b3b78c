package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/images/registry"
	"github.com/staticlet/staticlet/internal/lease"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// LabelSource is on containerd image records staticlet creates: where the
// image came from: SourcePull, SourceImportPrefix and the file's name, or
// SourceNamespacePrefix and the containerd namespace it was taken from.
const LabelSource = "io.staticlet.source"

// SourcePull is LabelSource's value on a pulled image.
const SourcePull = "pull"

// pullTimeout bounds one pull, so a registry that never answers cannot hold a
// pod's worker forever.
const pullTimeout = 2 * time.Minute

// Resolved is an image ready to run: unpacked, with its config.
type Resolved struct {
	Image  client.Image
	Config spec.ImageConfig
	// ID is the image's name and digest, name@digest.
	ID string
	// StopSignal is the image's STOPSIGNAL, empty if it sets none.
	StopSignal string
}

// StoreConfig configures where images come from.
type StoreConfig struct {
	// CredentialsFile, when set, is the only docker config file read for
	// registry credentials; otherwise the kubelet's search path is used
	// (config.json in Site.RootDir, ~/.docker and /.docker, then
	// .dockercfg).
	CredentialsFile string
	// RegistryConfigDir is a directory of containerd-style hosts.toml
	// files (mirrors, CA files, plain HTTP); none when empty.
	RegistryConfigDir string
	// Namespaces are other containerd namespaces whose images staticlet
	// uses when its own namespace lacks one, with no pull (kubeadm's and
	// crictl's pulls go to k8s.io); none when empty.
	Namespaces []string
	// AwaitImports, when set, is asked before an image that containerd
	// does not have is pulled or reported missing: it blocks while image
	// files are being imported (ctx bounds the wait) and reports whether
	// it waited, so that the image is looked for again first.
	AwaitImports func(ctx context.Context) bool
	// Pulled, when set, is told of every pull from a registry once it
	// ends (one per download: pods joining a pull in flight add none),
	// with how long it took and its error. It must not block.
	Pulled func(took time.Duration, err error)
}

// Site is what a Store shares with the runtime that makes it: the
// containerd connection and namespace, and staticlet's state directory.
type Site struct {
	Client *client.Client
	// Namespace is the containerd namespace of staticlet's images.
	Namespace string
	// Snapshotter unpacks images.
	Snapshotter string
	// CallTimeout bounds each containerd call that is not a pull, an
	// import or a copy from another namespace (bounded on their own).
	CallTimeout time.Duration
	// RootDir is staticlet's state directory, where a config.json with
	// registry credentials may be.
	RootDir string
	// Leases makes the leases pulls, imports and unpacking run under.
	Leases *lease.Maker
	Logger *slog.Logger
}

// Store finds, pulls, imports and lists the images of staticlet's
// containerd namespace. Safe for concurrent use.
type Store struct {
	cfg   StoreConfig
	site  Site
	pulls *pullGroup
	cache imageCache
	// registry says where pulls go and with which credentials.
	registry registry.Config
}

// NewStore returns the store of site's namespace. It starts nothing.
func NewStore(cfg StoreConfig, site Site) *Store {
	home, _ := os.UserHomeDir() // none under a bare service manager: skipped
	reg := registry.Config{
		CredentialFiles: registry.CredentialFiles(cfg.CredentialsFile, site.RootDir, home),
		HostsDir:        cfg.RegistryConfigDir,
	}
	return &Store{cfg: cfg, site: site, pulls: newPullGroup(), registry: reg}
}

// call scopes ctx to the namespace with the per-call deadline.
func (s *Store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(namespaces.WithNamespace(ctx, s.site.Namespace), s.site.CallTimeout)
}

// nsContext scopes ctx to the namespace, with no deadline of its own.
func (s *Store) nsContext(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, s.site.Namespace)
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

// NeedsPull tells whether container c's image is to be pulled before
// it starts: always under policy Always, when it is not present under
// IfNotPresent, never under Never (StartContainer then says the image is
// missing). from is the containerd namespace the image was taken from (see
// takeImage), "" when staticlet's own had it or none was looked for.
func (s *Store) NeedsPull(ctx context.Context, c *v1.Container) (need bool, from string, err error) {
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
	if s.cache.known(name) {
		// StartContainer looks it up anyway, and pulls it should it have
		// gone meanwhile: no second lookup on every restart.
		return false, "", nil
	}
	_, from, err = s.presentImage(ctx, name)
	switch {
	case err == nil:
		return false, from, nil
	case errdefs.IsNotFound(err):
		return true, "", nil
	default:
		return false, "", fmt.Errorf("looking up image %s: %w", c.Image, err)
	}
}

// Pull pulls container c's image, joining a pull of it in flight. When
// the pull fails under policy Always but an image of that name is present,
// in staticlet's namespace or another of StoreConfig.Namespaces, it
// returns the error with present set: the container may run what the node
// has (an air-gapped node keeps running its pods).
func (s *Store) Pull(ctx context.Context, c *v1.Container) (present bool, err error) {
	name, err := normalizeRef(c.Image)
	if err != nil {
		return false, err
	}
	_, err = s.pull(ctx, name)
	if err == nil {
		return false, nil
	}
	err = &pod.WaitingError{Reason: "ErrImagePull", Err: fmt.Errorf("pulling image %q: %w", c.Image, err)}
	if c.ImagePullPolicy == v1.PullAlways {
		if _, _, lerr := s.nodeImage(ctx, name); lerr == nil {
			return true, err
		}
	}
	return false, err
}

// Resolve finds ref in containerd and makes sure it is unpacked for
// the snapshotter. An image already present is used whatever the policy
// (Pull has run before, as policy said), also one present in another
// of StoreConfig.Namespaces, which is taken from it; a missing one is
// pulled, unless policy is Never.
func (s *Store) Resolve(ctx context.Context, ref string, policy v1.PullPolicy) (*Resolved, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return nil, err
	}
	img, _, err := s.presentImage(ctx, name)
	switch {
	case err == nil:
	case !errdefs.IsNotFound(err):
		return nil, fmt.Errorf("looking up image %s: %w", ref, err)
	case policy == v1.PullNever:
		return nil, &pod.WaitingError{Reason: "ErrImageNeverPull",
			Err: fmt.Errorf("container image %q is not present with pull policy of Never", ref)}
	default:
		if img, err = s.pull(ctx, name); err != nil {
			return nil, &pod.WaitingError{Reason: "ErrImagePull", Err: fmt.Errorf("pulling image %q: %w", ref, err)}
		}
	}
	digest := img.Target().Digest.String()
	if cached, ok := s.cache.get(img.Name(), digest); ok {
		return cached, nil
	}
	ctx, cancel := s.call(ctx)
	defer cancel()
	unpacked, err := img.IsUnpacked(ctx, s.site.Snapshotter)
	if err != nil {
		return nil, fmt.Errorf("checking image %s is unpacked: %w", ref, err)
	}
	if !unpacked {
		uctx, release, err := s.site.Leases.With(ctx, "unpack")
		if err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w", ref, err)
		}
		err = img.Unpack(uctx, s.site.Snapshotter)
		release()
		if err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w", ref, err)
		}
	}
	ispec, err := img.Spec(ctx)
	if err != nil {
		return nil, &pod.WaitingError{Reason: "CreateContainerError", Err: fmt.Errorf("reading the config of image %s: %w", ref, err)}
	}
	resolved := &Resolved{
		Image:      img,
		ID:         img.Name() + "@" + digest,
		StopSignal: ispec.Config.StopSignal,
		Config: spec.ImageConfig{
			Entrypoint: ispec.Config.Entrypoint,
			Cmd:        ispec.Config.Cmd,
			Env:        ispec.Config.Env,
			WorkingDir: ispec.Config.WorkingDir,
			User:       ispec.Config.User,
		},
	}
	s.cache.put(img.Name(), digest, resolved)
	return resolved, nil
}

// presentImage finds image name on the node, without a registry: as
// nodeImage does, and again once the image files being imported are in
// (one of them may hold it). from is as nodeImage's.
func (s *Store) presentImage(ctx context.Context, name string) (img client.Image, from string, err error) {
	img, from, err = s.nodeImage(ctx, name)
	if errdefs.IsNotFound(err) && s.awaitImports(ctx) {
		img, from, err = s.nodeImage(ctx, name)
	}
	return img, from, err
}

// nodeImage finds image name in staticlet's namespace, else takes it from
// another of StoreConfig.Namespaces; from is the namespace it was taken
// from, "" when staticlet's had it.
func (s *Store) nodeImage(ctx context.Context, name string) (img client.Image, from string, err error) {
	img, err = s.localImage(ctx, name)
	if !errdefs.IsNotFound(err) || len(s.cfg.Namespaces) == 0 {
		return img, "", err
	}
	if img, err = s.takeImage(ctx, name); err != nil {
		return nil, "", err
	}
	return img, strings.TrimPrefix(img.Labels()[LabelSource], SourceNamespacePrefix), nil
}

// awaitImports waits, at most pullTimeout, for the image files being
// imported; it reports whether there were any.
func (s *Store) awaitImports(ctx context.Context) bool {
	if s.cfg.AwaitImports == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	return s.cfg.AwaitImports(ctx)
}

// imageCache remembers images already checked unpacked and read, by name
// and digest, so that a restart does not read the image's config again. An
// image retagged to another digest misses the cache.
type imageCache struct {
	mu     sync.Mutex
	byName map[string]*Resolved // guarded by mu; keyed by name + "@" + digest
}

func (c *imageCache) get(name, digest string) (*Resolved, bool) {
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

func (c *imageCache) put(name, digest string, img *Resolved) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil {
		c.byName = map[string]*Resolved{}
	}
	c.byName[name+"@"+digest] = img
}

func (s *Store) localImage(ctx context.Context, name string) (client.Image, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	return s.site.Client.GetImage(ctx, name)
}

// pull fetches name, joining a pull of the same image already in flight so
// that many pods wanting one image cause one download.
func (s *Store) pull(ctx context.Context, name string) (client.Image, error) {
	return s.pulls.do(ctx, name, func(ctx context.Context) (img client.Image, err error) {
		// pullTimeout, not the shorter per-call deadline: a big image
		// takes a while.
		ctx, cancel := context.WithTimeout(s.nsContext(ctx), pullTimeout)
		defer cancel()
		if s.cfg.Pulled != nil {
			began := time.Now()
			defer func() { s.cfg.Pulled(time.Since(began), err) }()
		}
		// Credentials and hosts are read again for every pull, so that a
		// fixed file counts at the next retry.
		resolver, err := registry.NewResolver(ctx, s.registry)
		if err != nil {
			return nil, err
		}
		ctx, release, err := s.site.Leases.With(ctx, "pull")
		if err != nil {
			return nil, err
		}
		defer release()
		return s.site.Client.Pull(ctx, name, client.WithResolver(resolver), client.WithPullUnpack,
			client.WithPullSnapshotter(s.site.Snapshotter), client.WithPullLabel(LabelSource, SourcePull))
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

// forget drops what is cached of the images called name.
func (c *imageCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.byName {
		if strings.HasPrefix(key, name+"@") {
			delete(c.byName, key)
		}
	}
}
