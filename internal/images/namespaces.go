package images

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Images other tools put on the node. `kubeadm config images pull` and
// `crictl pull` put images in containerd's k8s.io namespace (the CRI's);
// staticlet looks in its own. An image missing there but present in one of
// StoreConfig.Namespaces is taken from it with no registry traffic: every
// blob the image needs on this platform (index, manifest, config, layers)
// is made present in staticlet's namespace, then the image record is made
// there with the same name and target, then it is unpacked, all under one
// lease, so that a staticlet killed half way leaves nothing the garbage
// collector keeps.
//
// containerd's content store is one store; namespaces only decide what
// each sees. Under its default content sharing policy ("shared") a writer
// opened with the expected digest of a blob the store has commits it in
// the new namespace without a byte copied. Under the "isolated" policy the
// blob's data is read from the other namespace and written again (the
// store keeps one file per digest either way).

// SourceNamespacePrefix starts the LabelSource of an image taken from
// another containerd namespace; the namespace's name follows.
const SourceNamespacePrefix = "namespace:"

// takeRefPrefix starts the ingest refs of blobs being made present.
const takeRefPrefix = "staticlet-take-"

// takeImage makes image name, missing in staticlet's namespace, present
// there from the first of StoreConfig.Namespaces whose copy of it is
// complete for this platform, and unpacks it. It returns a NotFound error
// when none has it. Concurrent calls for one name share one.
func (s *Store) takeImage(ctx context.Context, name string) (client.Image, error) {
	return s.pulls.do(ctx, SourceNamespacePrefix+name, func(ctx context.Context) (client.Image, error) {
		// A local copy and unpack, bounded as an import is.
		ctx, cancel := context.WithTimeout(s.nsContext(ctx), importTimeout)
		defer cancel()
		for _, ns := range s.cfg.Namespaces {
			if ns == s.site.Namespace {
				continue
			}
			img, found, err := s.takeImageFrom(ctx, ns, name)
			if err != nil || found {
				return img, err
			}
		}
		return nil, fmt.Errorf("image %s in no containerd namespace of %q: %w", name, s.cfg.Namespaces, errdefs.ErrNotFound)
	})
}

// takeImageFrom takes image name from namespace ns; found is false when ns
// does not have it, or not all of it.
func (s *Store) takeImageFrom(ctx context.Context, ns, name string) (_ client.Image, found bool, _ error) {
	is := s.site.Client.ImageService()
	callCtx, cancel := s.call(ctx)
	other, err := is.Get(namespaces.WithNamespace(callCtx, ns), name)
	cancel()
	switch {
	case errdefs.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("looking up image %s in containerd namespace %s: %w", name, ns, err)
	}
	start := time.Now()
	ctx, release, err := s.site.Leases.With(ctx, "take")
	if err != nil {
		return nil, false, fmt.Errorf("taking image %s from containerd namespace %s: %w", name, ns, err)
	}
	defer release()
	err = presentContent(ctx, s.site.Client.ContentStore(), ns, other.Target, platforms.Default())
	if errdefs.IsNotFound(err) {
		// Pulled in part, or its content pruned: as good as absent. Said
		// here, as the pull that follows fails for reasons of its own.
		s.site.Logger.Warn("image incomplete in another containerd namespace; not taken", "image", name, "namespace", ns, "err", err)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("taking image %s from containerd namespace %s: %w", name, ns, err)
	}
	rec := images.Image{Name: name, Target: other.Target, Labels: map[string]string{LabelSource: SourceNamespacePrefix + ns}}
	created, err := is.Create(ctx, rec)
	if errdefs.IsAlreadyExists(err) {
		// A pull or an import made it meanwhile: theirs stands.
		created, err = is.Get(ctx, name)
	}
	if err != nil {
		return nil, false, fmt.Errorf("taking image %s from containerd namespace %s: %w", name, ns, err)
	}
	img := client.NewImage(s.site.Client, created)
	if err := img.Unpack(ctx, s.site.Snapshotter); err != nil {
		return nil, false, fmt.Errorf("unpacking image %s taken from containerd namespace %s: %w", name, ns, err)
	}
	s.site.Logger.Info("image taken from another containerd namespace, without a pull",
		"image", name, "namespace", ns, "digest", other.Target.Digest, "took", time.Since(start).Round(time.Millisecond))
	return img, true, nil
}

// presentContent makes the blobs of target that platform needs present
// in ctx's namespace, from namespace src of the same store, and labels
// each parent with its children as a pull does, for the garbage collector.
// A blob src lacks is a NotFound error.
func presentContent(ctx context.Context, cs content.Store, src string, target ocispec.Descriptor, platform platforms.MatchComparer) error {
	srcCtx := namespaces.WithNamespace(ctx, src)
	present := images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		return nil, presentBlob(ctx, cs, srcCtx, desc)
	})
	// The handlers a pull of one platform uses, reading what present has
	// just committed.
	children := images.SetChildrenMappedLabels(cs, images.ChildrenHandler(cs), nil)
	children = images.LimitManifests(images.FilterPlatforms(children, platform), platform, 1)
	return images.Walk(ctx, images.Handlers(present, children), target)
}

// presentBlob commits blob desc in ctx's namespace: without reading it when
// the store shares it, else copied from srcCtx's namespace.
func presentBlob(ctx context.Context, cs content.Store, srcCtx context.Context, desc ocispec.Descriptor) error {
	w, err := content.OpenWriter(ctx, cs, content.WithRef(takeRefPrefix+desc.Digest.String()), content.WithDescriptor(desc))
	if errdefs.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing blob %s: %w", desc.Digest, err)
	}
	defer w.Close()
	st, err := w.Status()
	if err != nil {
		return fmt.Errorf("writing blob %s: %w", desc.Digest, err)
	}
	if st.Offset == desc.Size {
		// The store has it: the commit only records it here.
		err = w.Commit(ctx, desc.Size, desc.Digest)
	} else {
		err = copyBlob(ctx, w, cs, srcCtx, desc)
	}
	if err != nil && !errdefs.IsAlreadyExists(err) {
		return fmt.Errorf("writing blob %s: %w", desc.Digest, err)
	}
	return nil
}

// copyBlob writes blob desc from srcCtx's namespace to w and commits it.
func copyBlob(ctx context.Context, w content.Writer, cs content.Store, srcCtx context.Context, desc ocispec.Descriptor) error {
	ra, err := cs.ReaderAt(srcCtx, desc)
	if err != nil {
		return err
	}
	defer ra.Close()
	return content.Copy(ctx, w, content.NewReader(ra), desc.Size, desc.Digest)
}
