package images

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"

	"github.com/staticlet/staticlet/internal/lease"
	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// kubeletNS is where kubeadm's and crictl's pulls put images.
const kubeletNS = "k8s.io"

// TestPresentContent: under containerd's default sharing policy a blob
// is made present in another namespace without a byte written; a writer
// that does not find it shared (the "isolated" policy, here a store that
// hides the digest from containerd) copies it from the other namespace.
func TestPresentContent(t *testing.T) {
	env := ctrdtest.Start(t)
	c, err := client.New(env.Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const ns = "staticlet"
	maker := &lease.Maker{Leases: c.LeasesService(), Namespace: ns, CallTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)}
	for _, tt := range []struct {
		name   string
		hide   bool
		copied bool
	}{
		{name: "shared", hide: false, copied: false},
		{name: "not shared", hide: true, copied: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ref := "localhost/present:" + tt.name[:3]
			img := env.ImportImageWith(t, kubeletNS, testimage.Options{Ref: ref, Files: map[string][]byte{"bin/present": []byte(tt.name)}})
			ctx, release, err := maker.With(namespaces.WithNamespace(t.Context(), ns), "test")
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			cs := &countingStore{Store: c.ContentStore(), hideDigest: tt.hide}
			if err := presentContent(ctx, cs, kubeletNS, img.Target(), platforms.Default()); err != nil {
				t.Fatalf("presentContent(%s): %v", ref, err)
			}
			available, required, present, missing, err := ctrimages.Check(ctx, c.ContentStore(), img.Target(), platforms.Default())
			if err != nil || !available || len(missing) != 0 {
				t.Fatalf("ctrimages.Check(%s) in staticlet's namespace = %v, missing %v, %v, want all present", ref, available, missing, err)
			}
			var size int64
			for _, d := range append(present, img.Target()) {
				size += d.Size
			}
			wantWritten := int64(0)
			if tt.copied {
				wantWritten = size
			}
			if got := cs.written.Load(); got != wantWritten {
				t.Errorf("bytes written for %d blobs of %d bytes = %d, want %d", len(required)+1, size, got, wantWritten)
			}
		})
	}
}

// countingStore counts the bytes written through it; with hideDigest its
// writers do not tell containerd the digest they expect, so that it
// shares no blob.
type countingStore struct {
	content.Store
	hideDigest bool
	written    atomic.Int64
}

func (s *countingStore) Writer(ctx context.Context, opts ...content.WriterOpt) (content.Writer, error) {
	var wo content.WriterOpts
	for _, o := range opts {
		if err := o(&wo); err != nil {
			return nil, err
		}
	}
	if s.hideDigest {
		wo.Desc.Digest = ""
	}
	w, err := s.Store.Writer(ctx, content.WithRef(wo.Ref), content.WithDescriptor(wo.Desc))
	if err != nil {
		return nil, err
	}
	return &countingWriter{Writer: w, n: &s.written}, nil
}

type countingWriter struct {
	content.Writer
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.n.Add(int64(n))
	return n, err
}
