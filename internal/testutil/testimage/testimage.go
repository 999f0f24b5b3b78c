// Package testimage builds a small OCI container image from the host's static
// busybox, so tests and `make demo` can run real containers without a registry.
//
// It owns only the image bytes: Build writes an OCI image layout tar archive that
// containerd's import understands (`ctr images import`, client.Import). It does
// not talk to containerd; see package ctrdtest for that. Build is a pure
// function of its options and the busybox binary: for the same binary the
// archive, and so the image digest, is byte-for-byte the same. Build is safe for
// concurrent use.
package testimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DefaultRef is the image name used when Options.Ref is empty.
const DefaultRef = "localhost/busybox:test"

// DefaultBusybox is the busybox binary copied into the image when
// Options.Busybox is empty. It must be statically linked: the image holds no
// shared libraries.
const DefaultBusybox = "/bin/busybox"

// DefaultPath is the PATH in the image config's environment.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// IndexHTML is the content of /var/www/index.html in the image, for tests that
// serve it with `httpd -f -h /var/www`.
const IndexHTML = "hello from staticlet\n"

// annotationImageName is the annotation containerd's import reads for the full
// image name (images.AnnotationImageName in containerd); spelled out here so
// this package needs nothing from containerd.
const annotationImageName = "io.containerd.image.name"

// epoch is the modification time of every file in the layer and the creation
// time in the config, fixed so that the output is deterministic.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// fallbackApplets are linked when `busybox --list` cannot be run.
var fallbackApplets = []string{
	"awk", "cat", "echo", "env", "false", "grep", "head", "httpd", "id", "kill",
	"ls", "mkdir", "nc", "ps", "rm", "sed", "sh", "sleep", "tail", "touch",
	"true", "wget",
}

// Options configures Build. The zero value builds DefaultRef from
// DefaultBusybox with `sh` as its command.
type Options struct {
	// Ref is the image name recorded in index.json; DefaultRef if empty.
	Ref string
	// Busybox is the static busybox binary to copy; DefaultBusybox if empty.
	Busybox string
	// Entrypoint, if non-nil, is the config's entrypoint (none by default).
	Entrypoint []string
	// Cmd, if non-nil, replaces the default command ["sh"].
	Cmd []string
	// Env entries ("KEY=value") are added to the config's environment after
	// PATH=DefaultPath; an entry for PATH replaces the default.
	Env []string
	// User, if set, is the config's user (for example "65534:65534").
	User string
	// StopSignal, if set, is the config's stop signal (for example "SIGUSR1").
	StopSignal string
	// Files are extra executable files (mode 0755) added to the layer, by
	// path inside the image (for example "bin/healthd" or
	// "usr/local/bin/etcd"); directories the layer lacks are added, mode
	// 0755.
	Files map[string][]byte
}

// Build writes an OCI image layout tar archive (oci-layout, index.json and
// blobs/sha256/...) holding one image for the current GOARCH, with a single
// gzip layer containing busybox, a symlink per applet, /etc/passwd and
// /etc/group (root and nobody), /tmp, /root and /var/www/index.html.
func Build(w io.Writer, opts Options) error {
	if opts.Ref == "" {
		opts.Ref = DefaultRef
	}
	if opts.Busybox == "" {
		opts.Busybox = DefaultBusybox
	}
	bb, err := os.ReadFile(opts.Busybox)
	if err != nil {
		return fmt.Errorf("reading busybox: %w", err)
	}
	applets := listApplets(opts.Busybox)

	layerTar, err := buildLayer(bb, applets, opts.Files)
	if err != nil {
		return fmt.Errorf("building layer: %w", err)
	}
	layerGz, err := gzipBytes(layerTar)
	if err != nil {
		return fmt.Errorf("compressing layer: %w", err)
	}

	config := ocispec.Image{
		Created: &epoch,
		Platform: ocispec.Platform{
			Architecture: runtime.GOARCH,
			OS:           "linux",
		},
		Config: ocispec.ImageConfig{
			Env:        mergeEnv([]string{"PATH=" + DefaultPath}, opts.Env),
			Entrypoint: opts.Entrypoint,
			Cmd:        []string{"sh"},
			WorkingDir: "/",
			User:       opts.User,
			StopSignal: opts.StopSignal,
		},
		RootFS: ocispec.RootFS{
			Type:    "layers",
			DiffIDs: []digest.Digest{digest.FromBytes(layerTar)},
		},
	}
	if opts.Cmd != nil {
		config.Config.Cmd = opts.Cmd
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("encoding image config: %w", err)
	}

	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    descriptorOf(ocispec.MediaTypeImageConfig, configJSON),
		Layers:    []ocispec.Descriptor{descriptorOf(ocispec.MediaTypeImageLayerGzip, layerGz)},
	}
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("encoding image manifest: %w", err)
	}

	manifestDesc := descriptorOf(ocispec.MediaTypeImageManifest, manifestJSON)
	manifestDesc.Platform = &ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"}
	manifestDesc.Annotations = map[string]string{
		// containerd's import prefers the full name; other OCI tools expect
		// ref.name to hold only the tag, as `ctr images export` writes it.
		annotationImageName:       opts.Ref,
		ocispec.AnnotationRefName: refTag(opts.Ref),
	}
	index := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manifestDesc},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("encoding image index: %w", err)
	}
	layoutJSON, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return fmt.Errorf("encoding oci-layout: %w", err)
	}

	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(dirHeader(dir, 0o755)); err != nil {
			return fmt.Errorf("writing image archive: %w", err)
		}
	}
	files := []struct {
		name string
		data []byte
	}{
		{ocispec.ImageLayoutFile, layoutJSON},
		{"index.json", indexJSON},
		{blobPath(layerGz), layerGz},
		{blobPath(configJSON), configJSON},
		{blobPath(manifestJSON), manifestJSON},
	}
	for _, f := range files {
		if err := writeFile(tw, f.name, 0o644, f.data); err != nil {
			return fmt.Errorf("writing image archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing image archive: %w", err)
	}
	return nil
}

// listApplets runs busybox once to list its applets, falling back to a fixed
// list of common ones when it cannot be run (for example a foreign
// architecture). The result is sorted and free of names that are not plain
// file names.
func listApplets(busybox string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return slices.Clone(fallbackApplets)
	}
	var applets []string
	for _, name := range strings.Fields(string(out)) {
		if name == "busybox" || name == "." || name == ".." || strings.Contains(name, "/") {
			continue
		}
		applets = append(applets, name)
	}
	if len(applets) == 0 {
		return slices.Clone(fallbackApplets)
	}
	slices.Sort(applets)
	return slices.Compact(applets)
}

// buildLayer returns the uncompressed layer tar. Entries are written in a
// fixed order with fixed owners and times so the bytes depend only on the
// busybox binary and its applet list.
func buildLayer(busybox []byte, applets []string, files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := []struct {
		name string
		mode int64
	}{
		{"bin/", 0o755},
		{"etc/", 0o755},
		{"root/", 0o700},
		{"tmp/", 0o1777},
		{"var/", 0o755},
		{"var/www/", 0o755},
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(dirHeader(d.name, d.mode)); err != nil {
			return nil, err
		}
	}
	if err := writeFile(tw, "bin/busybox", 0o755, busybox); err != nil {
		return nil, err
	}
	for _, a := range applets {
		hdr := &tar.Header{
			Typeflag: tar.TypeSymlink,
			Name:     "bin/" + a,
			Linkname: "busybox",
			Mode:     0o777,
			ModTime:  epoch,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
	}
	etc := []struct {
		name string
		data string
	}{
		{"etc/group", "root:x:0:\nnogroup:x:65534:\n"},
		{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
		{"var/www/index.html", IndexHTML},
	}
	for _, f := range etc {
		if err := writeFile(tw, f.name, 0o644, []byte(f.data)); err != nil {
			return nil, err
		}
	}
	byName := make(map[string][]byte, len(files))
	for name, data := range files {
		byName[strings.TrimPrefix(name, "/")] = data
	}
	names := slices.Sorted(maps.Keys(byName))
	have := map[string]bool{}
	for _, d := range dirs {
		have[d.name] = true
	}
	for _, dir := range parentDirs(names) {
		if !have[dir] {
			if err := tw.WriteHeader(dirHeader(dir, 0o755)); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range names {
		if err := writeFile(tw, name, 0o755, byName[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parentDirs are the directories above the files names, each as a tar
// entry name ("usr/", "usr/local/"), sorted so that a parent comes before
// its children.
func parentDirs(names []string) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, name := range names {
		for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if !seen[dir+"/"] {
				seen[dir+"/"] = true
				dirs = append(dirs, dir+"/")
			}
		}
	}
	sort.Strings(dirs)
	return dirs
}

func dirHeader(name string, mode int64) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeDir,
		Name:     name,
		Mode:     mode,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     mode,
		Size:     int64(len(data)),
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// gzipBytes compresses b with a header that carries no name or time, so the
// output depends only on b (and the compress/gzip implementation).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func descriptorOf(mediaType string, b []byte) ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType: mediaType,
		Digest:    digest.FromBytes(b),
		Size:      int64(len(b)),
	}
}

func blobPath(b []byte) string {
	return path.Join(ocispec.ImageBlobsDir, "sha256", fmt.Sprintf("%x", sha256.Sum256(b)))
}

// refTag returns the tag of ref ("test" for "localhost/busybox:test"), or
// "latest" when ref has none. A digest suffix is ignored.
func refTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return "latest"
	}
	return ref[i+1:]
}

// mergeEnv returns base with each entry of extra appended, or replacing the
// entry of base with the same key.
func mergeEnv(base, extra []string) []string {
	out := slices.Clone(base)
	for _, e := range extra {
		key, _, _ := strings.Cut(e, "=")
		i := slices.IndexFunc(out, func(o string) bool {
			k, _, _ := strings.Cut(o, "=")
			return k == key
		})
		if i >= 0 {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	return out
}
