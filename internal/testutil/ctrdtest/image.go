package ctrdtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/staticlet/staticlet/internal/testutil/testimage"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// importTimeout bounds importing and unpacking one test image.
const importTimeout = 60 * time.Second

// defaultArchive is the test image archive for testimage.DefaultRef, built
// once per process: every test imports the same bytes.
var defaultArchive = sync.OnceValues(func() ([]byte, error) {
	var buf bytes.Buffer
	if err := testimage.Build(&buf, testimage.Options{}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
})

// ImportImage imports the busybox test image (package testimage) named ref,
// testimage.DefaultRef if empty, into namespace ns and unpacks it for
// e.Snapshotter. It skips the test when busybox is missing, failing it
// instead when CI is "true".
func (e *Env) ImportImage(t testing.TB, ns, ref string) client.Image {
	t.Helper()
	if ref == "" || ref == testimage.DefaultRef {
		requireBusybox(t, testimage.DefaultBusybox)
		archive, err := defaultArchive()
		if err != nil {
			t.Fatalf("ctrdtest: building test image: %v", err)
		}
		return e.importArchive(t, ns, archive)
	}
	return e.ImportImageWith(t, ns, testimage.Options{Ref: ref})
}

// ImportImageWith builds a test image with opts, for images that differ from
// the default (another name, command or user), and imports and unpacks it
// like ImportImage.
func (e *Env) ImportImageWith(t testing.TB, ns string, opts testimage.Options) client.Image {
	t.Helper()
	bb := opts.Busybox
	if bb == "" {
		bb = testimage.DefaultBusybox
	}
	requireBusybox(t, bb)
	var buf bytes.Buffer
	if err := testimage.Build(&buf, opts); err != nil {
		t.Fatalf("ctrdtest: building test image: %v", err)
	}
	return e.importArchive(t, ns, buf.Bytes())
}

func (e *Env) importArchive(t testing.TB, ns string, archive []byte) client.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), importTimeout)
	defer cancel()
	img, err := e.Import(ctx, ns, bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("ctrdtest: %v", err)
	}
	return img
}

// Import imports an image archive holding one image (an OCI layout or docker
// save tar) into namespace ns and unpacks it for e.Snapshotter. ctx must
// carry a deadline.
//
// It uses client.Import, which writes through the content store: the transfer
// service a containerd 2 client would otherwise prefer does not exist in
// containerd 1.6.
func (e *Env) Import(ctx context.Context, ns string, archive io.Reader) (client.Image, error) {
	ctx = namespaces.WithNamespace(ctx, ns)
	imgs, err := e.client.Import(ctx, archive)
	if err != nil {
		return nil, fmt.Errorf("importing image archive into namespace %s: %w", ns, err)
	}
	if len(imgs) != 1 {
		return nil, fmt.Errorf("importing image archive into namespace %s: got %d images, want 1", ns, len(imgs))
	}
	img := client.NewImage(e.client, imgs[0])
	if err := img.Unpack(ctx, e.Snapshotter); err != nil {
		return nil, fmt.Errorf("unpacking image %s for snapshotter %s: %w", img.Name(), e.Snapshotter, err)
	}
	return img, nil
}

// requireBusybox skips t, or fails it when CI is "true", if busybox is missing.
func requireBusybox(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		tier.Missing(t, fmt.Sprintf("ctrdtest: busybox-static is required: %v", err))
	}
}
