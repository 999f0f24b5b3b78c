package testvm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// dataHeadroom is the free space on the data disk beyond the files handed
// over: for the results and the guest's journal. Sparse, like the root.
const dataHeadroom = 512 << 20

// makeDataDisk writes an ext4 image at path holding the tree under dir.
// Without a journal, so that what the guest synced is in place on the disk
// even if it did not unmount it, for debugfs to read.
func makeDataDisk(ctx context.Context, path, dir string) error {
	size, err := treeSize(dir)
	if err != nil {
		return err
	}
	return makeExt4(ctx, path, dir, size+dataHeadroom, "-O", "^has_journal", "-L", "vmtest")
}

// readDiskFile returns the content of the file at path (absolute, in the
// image's file system) of the ext4 image, read with debugfs without
// mounting it. A missing file is an error wrapping fs.ErrNotExist.
func readDiskFile(ctx context.Context, image, path string) (string, error) {
	out, stderr, err := debugfs(ctx, image, "cat "+path)
	if err != nil {
		return "", err
	}
	// debugfs reports a failed command on stderr but exits 0.
	if out == "" && strings.Contains(stderr, "not found") {
		return "", fmt.Errorf("reading %s from %s: %w", path, image, fs.ErrNotExist)
	}
	return out, nil
}

// copyDiskDir copies the directory at path (absolute, in the image's file
// system) of the ext4 image into dst, an existing directory, as
// dst/<base name of path>. A missing directory is an error wrapping
// fs.ErrNotExist.
func copyDiskDir(ctx context.Context, image, path, dst string) error {
	if strings.ContainsAny(dst, " \t\"") {
		return fmt.Errorf("copying %s out of %s: debugfs cannot take the destination %q", path, image, dst)
	}
	_, stderr, err := debugfs(ctx, image, "rdump "+path+" "+dst)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dst, filepath.Base(path))); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("copying %s out of %s: %w (%s)", path, image, err, strings.TrimSpace(stderr))
	}
	return nil
}

// debugfs runs one debugfs request on image, read-only, and returns its
// stdout and stderr (less the version banner).
func debugfs(ctx context.Context, image, request string) (string, string, error) {
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(ctx, "debugfs", "-R", request, image)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("debugfs -R %q %s: %w\n%s", request, image, err, stderr.String())
	}
	_, rest, _ := strings.Cut(stderr.String(), "\n") // "debugfs 1.47.0 (5-Feb-2023)"
	return stdout.String(), rest, nil
}
