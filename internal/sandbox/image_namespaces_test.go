package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/lease"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// kubeletNS is where kubeadm's and crictl's pulls put images.
const kubeletNS = "k8s.io"

// TestImageFromNamespace: an image only in containerd's k8s.io namespace
// is used with no registry traffic, under every pull policy: it is made
// present in staticlet's namespace with the same digest, labelled with
// where it came from, unpacked, and runs; no lease is left. Without
// ImageNamespaces it is not found. The images are named after a loopback
// registry that counts what it is asked, and answers nothing.
func TestImageFromNamespace(t *testing.T) {
	var asked atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(reg.Close)
	name := func(repo string) string { return reg.Listener.Addr().String() + "/" + repo + ":1" }
	h := newHarnessWith(t, func(c *Config) { c.Images.Namespaces = []string{"absent", kubeletNS} })
	preload := func(ref string) client.Image {
		t.Helper()
		// A layer of its own, so that nothing of it is in staticlet's
		// namespace already.
		return h.env.ImportImageWith(t, kubeletNS, testimage.Options{Ref: ref, Files: map[string][]byte{"bin/preloaded": []byte(ref)}})
	}
	ifNotPresent, never, always := name("ifnotpresent"), name("never"), name("always")
	want := map[string]client.Image{ifNotPresent: preload(ifNotPresent), never: preload(never), always: preload(always)}
	p := h.decode("/m/preloaded.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: preloaded
  namespace: ns
spec:
  containers:
  - {name: ifnotpresent, image: %q, imagePullPolicy: IfNotPresent, command: [sh, -c, %q]}
  - {name: never, image: %q, imagePullPolicy: Never, command: [sh, -c, %q]}
  - {name: always, image: %q, imagePullPolicy: Always, command: [sh, -c, %q]}
`, ifNotPresent, idleScript, never, idleScript, always, idleScript))

	t.Run("without ImageNamespaces it is not found", func(t *testing.T) {
		cfg := h.rt.cfg
		cfg.Images.Namespaces = nil
		rt, err := New(h.ctx(), cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer rt.Close()
		c := &p.Spec.Containers[0]
		if need, from, err := rt.ImageNeedsPull(h.ctx(), c); err != nil || !need || from != "" {
			t.Errorf("ImageNeedsPull(%s) = %v, %q, %v, want a pull", c.Image, need, from, err)
		}
		c = &p.Spec.Containers[1]
		if _, err := rt.images.Resolve(h.ctx(), c.Image, c.ImagePullPolicy); pod.WaitingReason(err, "") != "ErrImageNeverPull" {
			t.Errorf("Resolve(%s, Never) = %v, want ErrImageNeverPull", c.Image, err)
		}
		h.wantNoImage(t, c.Image)
	})

	sb := h.sandbox(p)
	t.Run("IfNotPresent", func(t *testing.T) {
		c := &p.Spec.Containers[0]
		need, from, err := h.rt.ImageNeedsPull(h.ctx(), c)
		if err != nil || need || from != kubeletNS {
			t.Fatalf("ImageNeedsPull(%s) = %v, %q, %v, want no pull, taken from %s", c.Image, need, from, err, kubeletNS)
		}
		h.wantTaken(t, c.Image, want[c.Image])
		// The lease is gone: the image alone keeps its content.
		h.collectGarbage(t)
		img, err := h.client.GetImage(h.nsCtx(), c.Image)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _, _, missing, err := ctrimages.Check(h.nsCtx(), h.client.ContentStore(), img.Target(), platforms.Default()); err != nil || !ok {
			t.Errorf("after a garbage collection, image %s lacks %v (%v)", c.Image, missing, err)
		}
		h.start(p, sb, c.Name, 0)
		// Now staticlet's own.
		if need, from, err := h.rt.ImageNeedsPull(h.ctx(), c); err != nil || need || from != "" {
			t.Errorf("ImageNeedsPull(%s) again = %v, %q, %v, want no pull, from staticlet's namespace", c.Image, need, from, err)
		}
	})
	t.Run("Never", func(t *testing.T) {
		c := &p.Spec.Containers[1]
		h.start(p, sb, c.Name, 0)
		h.wantTaken(t, c.Image, want[c.Image])
	})
	if n := asked.Load(); n != 0 {
		t.Errorf("the registry was asked %d times, want none", n)
	}
	t.Run("Always: a failed pull falls back to the other namespace", func(t *testing.T) {
		c := &p.Spec.Containers[2]
		if need, _, err := h.rt.ImageNeedsPull(h.ctx(), c); err != nil || !need {
			t.Errorf("ImageNeedsPull(%s, Always) = %v, %v, want a pull", c.Image, need, err)
		}
		present, err := h.rt.PullImage(h.ctx(), c)
		if err == nil || !present {
			t.Fatalf("PullImage(%s) = %v, %v, want the registry's refusal with the image present", c.Image, present, err)
		}
		if asked.Load() == 0 {
			t.Errorf("PullImage(%s) asked the registry nothing", c.Image)
		}
		h.wantTaken(t, c.Image, want[c.Image])
		h.start(p, sb, c.Name, 0)
	})
	h.wantNoLease(t)

	t.Run("an incomplete image is not taken", func(t *testing.T) {
		ref := name("incomplete")
		h.preloadIncomplete(ref, want[ifNotPresent])
		c := &v1.Container{Name: "x", Image: ref, ImagePullPolicy: v1.PullIfNotPresent}
		if need, from, err := h.rt.ImageNeedsPull(h.ctx(), c); err != nil || !need || from != "" {
			t.Errorf("ImageNeedsPull(%s) = %v, %q, %v, want a pull", ref, need, from, err)
		}
		h.wantNoImage(t, ref)
		h.wantNoLease(t)
		// What was made present before the missing layer was found goes.
		h.collectGarbage(t)
		img, err := h.client.ImageService().Get(namespaces.WithNamespace(h.ctx(), kubeletNS), ref)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := h.client.ContentStore().Info(h.nsCtx(), img.Target.Digest); err == nil {
			t.Errorf("the manifest of %s is left in staticlet's namespace: %+v", ref, info)
		}
	})
}

// wantTaken checks that image name is in staticlet's namespace with
// other's target, labelled as taken from k8s.io, unpacked, and listed so.
func (h *harness) wantTaken(t *testing.T, name string, other client.Image) {
	t.Helper()
	img, err := h.client.GetImage(h.nsCtx(), name)
	if err != nil {
		t.Fatalf("image %s in staticlet's namespace: %v", name, err)
	}
	if got, want := img.Target().Digest, other.Target().Digest; got != want {
		t.Errorf("image %s in staticlet's namespace has digest %s, want %s as in %s", name, got, want, kubeletNS)
	}
	if got, want := img.Labels()[images.LabelSource], images.SourceNamespacePrefix+kubeletNS; got != want {
		t.Errorf("image %s has label %s=%q, want %q", name, images.LabelSource, got, want)
	}
	if ok, err := img.IsUnpacked(h.nsCtx(), h.env.Snapshotter); err != nil || !ok {
		t.Errorf("image %s: IsUnpacked = %v, %v, want true", name, ok, err)
	}
	list, err := h.rt.images.ListImages(h.ctx())
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	for _, info := range list {
		if info.Name == name {
			if info.Source != images.SourceNamespacePrefix+kubeletNS || info.Size <= 0 {
				t.Errorf("ListImages has %+v, want source %s%s and a size", info, images.SourceNamespacePrefix, kubeletNS)
			}
			return
		}
	}
	t.Errorf("ListImages = %+v, want %s among them", list, name)
}

// collectGarbage runs containerd's garbage collector and waits for it.
func (h *harness) collectGarbage(t *testing.T) {
	t.Helper()
	ls := h.client.LeasesService()
	l, err := ls.Create(h.nsCtx(), leases.WithRandomID())
	if err != nil {
		t.Fatalf("creating a lease: %v", err)
	}
	if err := ls.Delete(h.nsCtx(), l, leases.SynchronousDelete); err != nil {
		t.Fatalf("deleting a lease with a garbage collection: %v", err)
	}
}

// wantNoImage checks that staticlet's namespace has no image name.
func (h *harness) wantNoImage(t *testing.T, name string) {
	t.Helper()
	if img, err := h.client.GetImage(h.nsCtx(), name); err == nil {
		t.Errorf("staticlet's namespace has image %s (%s), want none", name, img.Target().Digest)
	}
}

// wantNoLease checks that no lease of staticlet's is left.
func (h *harness) wantNoLease(t *testing.T) {
	t.Helper()
	all, err := h.client.LeasesService().List(h.nsCtx())
	if err != nil {
		t.Fatalf("listing leases: %v", err)
	}
	for _, l := range all {
		if _, own := l.Labels[lease.LabelLease]; own || strings.HasPrefix(l.ID, "staticlet-") {
			t.Errorf("lease %s (%v) is left", l.ID, l.Labels)
		}
	}
}

// preloadIncomplete makes image ref in k8s.io a manifest with base's
// config and a layer the store does not have, as a pull cut short leaves.
func (h *harness) preloadIncomplete(ref string, base client.Image) {
	t := h.t
	t.Helper()
	ctx := namespaces.WithNamespace(h.ctx(), kubeletNS)
	ctx, done, err := h.client.WithLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer done(context.WithoutCancel(ctx))
	cfg, err := base.Config(ctx)
	if err != nil {
		t.Fatalf("config of %s: %v", base.Name(), err)
	}
	missing := []byte("never stored")
	m := ocispec.Manifest{
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfg,
		Layers:    []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(missing), Size: int64(len(missing))}},
	}
	m.SchemaVersion = 2
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: m.MediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := content.WriteBlob(ctx, h.client.ContentStore(), "incomplete", bytes.NewReader(b), desc); err != nil {
		t.Fatalf("writing the manifest of %s: %v", ref, err)
	}
	if _, err := h.client.ImageService().Create(ctx, ctrimages.Image{Name: ref, Target: desc}); err != nil {
		t.Fatalf("creating image %s in %s: %v", ref, kubeletNS, err)
	}
}

// TestNewChecksImageNamespaces: a name containerd would refuse at every
// lookup is refused at start instead.
func TestNewChecksImageNamespaces(t *testing.T) {
	for _, ns := range []string{"", "a b", "-k8s.io"} {
		_, err := New(context.Background(), Config{Address: "/nonexistent.sock", RootDir: t.TempDir(), Images: images.StoreConfig{Namespaces: []string{ns}}})
		if err == nil || !strings.Contains(err.Error(), "image namespace") {
			t.Errorf("New with image namespace %q = %v, want it refused", ns, err)
		}
	}
}
