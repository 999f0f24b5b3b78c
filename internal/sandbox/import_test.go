package sandbox

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// TestImportArchive imports docker save and OCI archives, plain and
// compressed, and finds each image under the name a manifest's image
// normalizes to, unpacked, labelled with its file, and listed.
func TestImportArchive(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name     string
		ref      string // the name the archive gives
		want     string // the name containerd has
		docker   bool
		compress func(t *testing.T, b []byte) []byte
	}{
		{name: "docker save plain", ref: "localhost/imported:plain", want: "localhost/imported:plain", docker: true},
		{name: "docker save gzip", ref: "imported:gz", want: "docker.io/library/imported:gz", docker: true, compress: gzipped},
		{name: "docker save zstd", ref: "localhost/imported:zst", want: "localhost/imported:zst", docker: true, compress: zstded},
		{name: "oci plain", ref: "imported:oci", want: "docker.io/library/imported:oci"},
		{name: "oci gzip", ref: "localhost/imported:ocigz", want: "localhost/imported:ocigz", compress: gzipped},
		{name: "oci zstd", ref: "localhost/imported:ocizst", want: "localhost/imported:ocizst", compress: zstded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			archive := buildArchive(t, tt.ref, tt.docker)
			if tt.compress != nil {
				archive = tt.compress(t, archive)
			}
			source := strings.ReplaceAll(tt.name, " ", "-") + ".tar"
			got, err := h.rt.images.ImportArchive(h.ctx(), bytes.NewReader(archive), source)
			if err != nil {
				t.Fatalf("ImportArchive: %v", err)
			}
			if len(got) != 1 || got[0].Name != tt.want || got[0].Digest == "" {
				t.Fatalf("ImportArchive = %+v, want one image %s", got, tt.want)
			}
			img, err := h.client.GetImage(h.nsCtx(), tt.want)
			if err != nil {
				t.Fatalf("GetImage(%s): %v", tt.want, err)
			}
			if src := img.Labels()[images.LabelSource]; src != "import:"+source {
				t.Errorf("label %s = %q, want %q", images.LabelSource, src, "import:"+source)
			}
			if ok, err := img.IsUnpacked(h.nsCtx(), h.env.Snapshotter); err != nil || !ok {
				t.Errorf("IsUnpacked = %v, %v, want true", ok, err)
			}
			if tt.ref != tt.want {
				if _, err := h.client.GetImage(h.nsCtx(), tt.ref); err == nil {
					t.Errorf("the archive's own name %s is left in containerd", tt.ref)
				}
			}
			if ok, err := h.rt.images.HasImage(h.ctx(), tt.want); err != nil || !ok {
				t.Errorf("HasImage(%s) = %v, %v, want true", tt.want, ok, err)
			}
			list, err := h.rt.images.ListImages(h.ctx())
			if err != nil {
				t.Fatalf("ListImages: %v", err)
			}
			found := false
			for _, info := range list {
				if info.Name == tt.want {
					found = true
					if info.Digest != got[0].Digest || info.Size <= 0 || info.Source != "import:"+source || info.Created.IsZero() {
						t.Errorf("ListImages has %+v, want digest %s, a size, source import:%s and a time", info, got[0].Digest, source)
					}
				}
			}
			if !found {
				t.Errorf("ListImages = %+v, want %s among them", list, tt.want)
			}
		})
	}

	t.Run("corrupt", func(t *testing.T) {
		archive := gzipped(t, []byte("this is not a tar archive, only text that goes on for a while"))
		if got, err := h.rt.images.ImportArchive(h.ctx(), bytes.NewReader(archive), "bad.tar.gz"); err == nil {
			t.Errorf("ImportArchive(corrupt) = %+v, want an error", got)
		} else if !strings.Contains(err.Error(), "bad.tar.gz") {
			t.Errorf("ImportArchive(corrupt) error %q does not name the file", err)
		}
	})
	t.Run("missing image", func(t *testing.T) {
		if ok, err := h.rt.images.HasImage(h.ctx(), "localhost/nowhere:v1"); err != nil || ok {
			t.Errorf("HasImage(missing) = %v, %v, want false", ok, err)
		}
	})
}

// buildArchive builds the test image named ref, as an OCI layout tar or
// (docker) a docker save tar.
func buildArchive(t *testing.T, ref string, docker bool) []byte {
	t.Helper()
	var oci bytes.Buffer
	if err := testimage.Build(&oci, testimage.Options{Ref: ref}); err != nil {
		t.Fatalf("building test image: %v", err)
	}
	if !docker {
		return oci.Bytes()
	}
	var out bytes.Buffer
	if err := testimage.DockerSave(&out, oci.Bytes()); err != nil {
		t.Fatalf("DockerSave: %v", err)
	}
	return out.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	t.Helper()
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}
