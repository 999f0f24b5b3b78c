package images

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// stamp tells whether a file (or a layout directory's tree) changed since
// it was last looked at, without reading it.
type stamp struct {
	dir    bool
	size   int64 // of the file, or of all the tree's files
	count  int   // files in the tree
	ino    uint64
	newest time.Time // latest modification or change of anything in it
}

// stampOf stats the file or OCI layout directory at path, following a
// symlink.
func stampOf(path string) (stamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return stamp{}, fmt.Errorf("%s is neither a regular file nor a directory", path)
		}
		st := stamp{size: info.Size(), newest: changed(info)}
		if sys, ok := info.Sys().(*syscall.Stat_t); ok {
			st.ino = sys.Ino
		}
		return st, nil
	}
	st := stamp{dir: true, newest: changed(info)}
	err = filepath.WalkDir(path, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			st.size += info.Size()
			st.count++
		}
		if t := changed(info); t.After(st.newest) {
			st.newest = t
		}
		return nil
	})
	return st, err
}

// changed is the later of info's modification and status change times: a
// file renamed into place or copied with its old time shows as new.
func changed(info fs.FileInfo) time.Time {
	t := info.ModTime()
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		if c := time.Unix(sys.Ctim.Unix()); c.After(t) {
			t = c
		}
	}
	return t.Truncate(0)
}

// digestOf hashes the content at path: a file's bytes, or the tar stream a
// layout directory is imported as.
func digestOf(path string, st stamp) (string, error) {
	rd, err := open(path, st)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, rd)
	if cerr := rd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil)), nil
}

// open returns the content to import from path: the file itself, or for
// an OCI image layout directory a tar stream of its tree.
func open(path string, st stamp) (io.ReadCloser, error) {
	if !st.dir {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("opening image file: %w", err)
		}
		return f, nil
	}
	if _, err := os.Stat(filepath.Join(path, ocispec.ImageLayoutFile)); err != nil {
		return nil, fmt.Errorf("directory %s is not an OCI image layout (no %s): %w", path, ocispec.ImageLayoutFile, err)
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeTree(pw, path))
	}()
	return &treeReader{PipeReader: pr, done: done}, nil
}

// treeReader is the tar stream of a directory; Close stops and waits for
// the goroutine writing it.
type treeReader struct {
	*io.PipeReader
	done chan struct{}
}

func (t *treeReader) Close() error {
	err := t.PipeReader.Close()
	<-t.done
	return err
}

// writeTree writes the directories and regular files under root as a tar
// stream, in lexical order, with names relative to root and no owners or
// times, so that the same tree always gives the same bytes.
func writeTree(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case e.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755})
		case !e.Type().IsRegular():
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: info.Size()}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, io.LimitReader(f, info.Size())); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading layout directory %s: %w", root, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("reading layout directory %s: %w", root, err)
	}
	return nil
}
