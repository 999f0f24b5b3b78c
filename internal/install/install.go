// Package install puts files in place the way a program that is running
// from them needs: a new file renamed over the old, so that processes
// started from the old one keep it, and only when the content changed.
package install

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Bytes writes data to dst, executable, unless dst holds data
// already. The file is renamed into place.
func Bytes(data []byte, dst string) error {
	if cur, err := os.ReadFile(dst); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	return replace(dst, time.Time{}, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// File copies file src (following links) to dst, executable, with
// src's modification time, unless dst has src's size and time already.
// The copy is renamed into place.
func File(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if cur, err := os.Stat(dst); err == nil && cur.Size() == st.Size() && cur.ModTime().Equal(st.ModTime()) {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return replace(dst, st.ModTime(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// replace writes a new executable file through write, with
// modification time mtime unless it is zero, and renames it to dst.
func replace(dst string, mtime time.Time, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".install-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(tmp.Name(), mtime, mtime); err != nil {
			return err
		}
	}
	return os.Rename(tmp.Name(), dst)
}
