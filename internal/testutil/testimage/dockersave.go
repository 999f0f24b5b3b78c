package testimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DockerSave rewrites an archive Build wrote in the layout `docker save`
// writes: manifest.json (config, repo tags and layers of the image) and the
// blobs, with no oci-layout or index.json, so that importers take the
// Docker path. The repo tag is the image name Build recorded.
func DockerSave(w io.Writer, ociArchive []byte) error {
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(ociArchive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading OCI archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("reading %s from OCI archive: %w", hdr.Name, err)
		}
		files[path.Clean(hdr.Name)] = b
	}
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		return fmt.Errorf("decoding index.json: %w", err)
	}
	if len(index.Manifests) != 1 {
		return fmt.Errorf("index.json has %d manifests, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	var manifest ocispec.Manifest
	if err := json.Unmarshal(files[blobName(desc.Digest.Encoded())], &manifest); err != nil {
		return fmt.Errorf("decoding image manifest: %w", err)
	}
	entry := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blobName(manifest.Config.Digest.Encoded()), RepoTags: []string{desc.Annotations[annotationImageName]}}
	for _, l := range manifest.Layers {
		entry.Layers = append(entry.Layers, blobName(l.Digest.Encoded()))
	}
	manifestJSON, err := json.Marshal([]any{entry})
	if err != nil {
		return fmt.Errorf("encoding manifest.json: %w", err)
	}

	tw := tar.NewWriter(w)
	if err := writeFile(tw, "manifest.json", 0o644, manifestJSON); err != nil {
		return fmt.Errorf("writing docker save archive: %w", err)
	}
	for _, name := range append([]string{entry.Config}, entry.Layers...) {
		b, ok := files[name]
		if !ok {
			return fmt.Errorf("OCI archive lacks blob %s", name)
		}
		if err := writeFile(tw, name, 0o644, b); err != nil {
			return fmt.Errorf("writing docker save archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing docker save archive: %w", err)
	}
	return nil
}

func blobName(hex string) string {
	return path.Join(ocispec.ImageBlobsDir, "sha256", hex)
}
