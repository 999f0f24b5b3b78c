package testimage

import (
	"fmt"

	"github.com/staticlet/staticlet/internal/testutil/tier"

	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// requireBusybox skips the test when the default busybox is missing, or fails
// it under CI where the environment is expected to be complete.
func requireBusybox(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(DefaultBusybox); err != nil {
		tier.Missing(t, fmt.Sprintf("busybox-static is required: %v", err))
	}
}

// readTar returns the entries of a tar stream by name, failing on duplicates.
func readTar(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	hdrs := map[string]*tar.Header{}
	data := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		if _, dup := hdrs[hdr.Name]; dup {
			t.Fatalf("duplicate tar entry %q", hdr.Name)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading tar entry %q: %v", hdr.Name, err)
		}
		hdrs[hdr.Name] = hdr
		data[hdr.Name] = b
	}
	return hdrs, data
}

// blob returns the blob of desc from the layout, checking its size and digest.
func blob(t *testing.T, layout map[string][]byte, desc ocispec.Descriptor) []byte {
	t.Helper()
	name := "blobs/" + desc.Digest.Algorithm().String() + "/" + desc.Digest.Encoded()
	b, ok := layout[name]
	if !ok {
		t.Fatalf("blob %s (%s) missing from layout", desc.Digest, desc.MediaType)
	}
	if int64(len(b)) != desc.Size {
		t.Errorf("blob %s size = %d, want %d", desc.Digest, len(b), desc.Size)
	}
	if got := digest.FromBytes(b); got != desc.Digest {
		t.Errorf("blob %s digest = %s", desc.Digest, got)
	}
	return b
}

func decode(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", what, err)
	}
}

// buildImage builds an image with opts and returns the files of its
// layout and its manifest.
func buildImage(t *testing.T, opts Options) (map[string][]byte, ocispec.Manifest) {
	t.Helper()
	var buf bytes.Buffer
	if err := Build(&buf, opts); err != nil {
		t.Fatalf("Build(%+v): %v", opts, err)
	}
	_, layout := readTar(t, &buf)
	var index ocispec.Index
	decode(t, "index.json", layout["index.json"], &index)
	var manifest ocispec.Manifest
	decode(t, "manifest", blob(t, layout, index.Manifests[0]), &manifest)
	return layout, manifest
}

func TestBuildLayout(t *testing.T) {
	requireBusybox(t)
	var buf bytes.Buffer
	opts := Options{Env: []string{"FOO=bar"}, StopSignal: "SIGUSR1"}
	if err := Build(&buf, opts); err != nil {
		t.Fatalf("Build: %v", err)
	}
	_, layout := readTar(t, &buf)

	var ol ocispec.ImageLayout
	decode(t, "oci-layout", layout[ocispec.ImageLayoutFile], &ol)
	if ol.Version != ocispec.ImageLayoutVersion {
		t.Errorf("oci-layout version = %q, want %q", ol.Version, ocispec.ImageLayoutVersion)
	}

	var index ocispec.Index
	decode(t, "index.json", layout["index.json"], &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
	}
	md := index.Manifests[0]
	if got := md.Annotations["io.containerd.image.name"]; got != DefaultRef {
		t.Errorf("io.containerd.image.name = %q, want %q", got, DefaultRef)
	}
	if got := md.Annotations[ocispec.AnnotationRefName]; got != "test" {
		t.Errorf("%s = %q, want %q", ocispec.AnnotationRefName, got, "test")
	}
	if md.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest media type = %q", md.MediaType)
	}

	var manifest ocispec.Manifest
	decode(t, "manifest", blob(t, layout, md), &manifest)
	var config ocispec.Image
	decode(t, "config", blob(t, layout, manifest.Config), &config)
	if config.OS != "linux" || config.Architecture != runtime.GOARCH {
		t.Errorf("config platform = %s/%s, want linux/%s", config.OS, config.Architecture, runtime.GOARCH)
	}
	wantEnv := []string{"PATH=" + DefaultPath, "FOO=bar"}
	if !slices.Equal(config.Config.Env, wantEnv) {
		t.Errorf("config Env = %q, want %q", config.Config.Env, wantEnv)
	}
	if !slices.Equal(config.Config.Cmd, []string{"sh"}) || config.Config.WorkingDir != "/" || config.Config.StopSignal != "SIGUSR1" {
		t.Errorf("config = %+v, want Cmd [sh], WorkingDir /, StopSignal SIGUSR1", config.Config)
	}
	if len(manifest.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 {
		t.Fatalf("got %d layers and %d diff IDs, want 1 and 1", len(manifest.Layers), len(config.RootFS.DiffIDs))
	}

	gz := blob(t, layout, manifest.Layers[0])
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("opening layer: %v", err)
	}
	layerTar, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("decompressing layer: %v", err)
	}
	if got := digest.FromBytes(layerTar); got != config.RootFS.DiffIDs[0] {
		t.Errorf("layer diff ID = %s, config says %s", got, config.RootFS.DiffIDs[0])
	}
	hdrs, files := readTar(t, bytes.NewReader(layerTar))
	if h := hdrs["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh = %+v, want symlink to busybox", h)
	}
	want, err := os.ReadFile(DefaultBusybox)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["bin/busybox"], want) {
		t.Errorf("bin/busybox differs from %s", DefaultBusybox)
	}
	if h := hdrs["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v, want mode 1777", h)
	}
	if got := string(files["var/www/index.html"]); got != IndexHTML {
		t.Errorf("index.html = %q, want %q", got, IndexHTML)
	}
	if !strings.Contains(string(files["etc/passwd"]), "nobody:x:65534:65534:") {
		t.Errorf("etc/passwd = %q, want a nobody entry", files["etc/passwd"])
	}
}

func TestBuildDeterministic(t *testing.T) {
	requireBusybox(t)
	var a, b bytes.Buffer
	if err := Build(&a, Options{}); err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := Build(&b, Options{}); err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two builds with the same options differ")
	}
}

func TestBuildOverrides(t *testing.T) {
	requireBusybox(t)
	tests := []struct {
		name string
		opts Options
		want ocispec.ImageConfig
	}{
		{
			name: "defaults",
			want: ocispec.ImageConfig{Env: []string{"PATH=" + DefaultPath}, Cmd: []string{"sh"}, WorkingDir: "/"},
		},
		{
			name: "overrides",
			opts: Options{
				Ref:        "example.com/x/y:v2",
				Entrypoint: []string{"httpd", "-f"},
				Cmd:        []string{"-p", "8080"},
				Env:        []string{"PATH=/bin", "A=1"},
				User:       "65534:65534",
				StopSignal: "SIGINT",
			},
			want: ocispec.ImageConfig{
				Env:        []string{"PATH=/bin", "A=1"},
				Entrypoint: []string{"httpd", "-f"},
				Cmd:        []string{"-p", "8080"},
				WorkingDir: "/",
				User:       "65534:65534",
				StopSignal: "SIGINT",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layout, manifest := buildImage(t, tt.opts)
			var config ocispec.Image
			decode(t, "config", blob(t, layout, manifest.Config), &config)
			got := config.Config
			if !slices.Equal(got.Env, tt.want.Env) || !slices.Equal(got.Entrypoint, tt.want.Entrypoint) ||
				!slices.Equal(got.Cmd, tt.want.Cmd) || got.WorkingDir != tt.want.WorkingDir ||
				got.User != tt.want.User || got.StopSignal != tt.want.StopSignal {
				t.Errorf("Build(%+v) config = %+v, want %+v", tt.opts, got, tt.want)
			}
		})
	}
}

// TestBuildFiles checks extra files land where asked, with the directories
// the layer lacked added once and the ones it has left alone.
func TestBuildFiles(t *testing.T) {
	requireBusybox(t)
	opts := Options{Files: map[string][]byte{
		"usr/local/bin/etcd": []byte("etcd"),
		"/bin/healthd":       []byte("healthd"),
	}}
	layout, manifest := buildImage(t, opts)
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, layout, manifest.Layers[0])))
	if err != nil {
		t.Fatalf("opening layer: %v", err)
	}
	hdrs, files := readTar(t, zr) // fails on a directory written twice
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if h := hdrs[dir]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o755 {
			t.Errorf("layer entry %s = %+v, want a directory of mode 0755", dir, h)
		}
	}
	for name, want := range map[string]string{"usr/local/bin/etcd": "etcd", "bin/healthd": "healthd"} {
		if h := hdrs[name]; h == nil || h.Mode != 0o755 || string(files[name]) != want {
			t.Errorf("layer entry %s = %+v holding %q, want mode 0755 holding %q", name, h, files[name], want)
		}
	}
}

func TestRefTag(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"localhost/busybox:test", "test"},
		{"localhost:5000/busybox", "latest"},
		{"localhost:5000/busybox:v1", "v1"},
		{"busybox", "latest"},
		{"busybox:1@sha256:abc", "1"},
	}
	for _, tt := range tests {
		if got := refTag(tt.ref); got != tt.want {
			t.Errorf("refTag(%q) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}
