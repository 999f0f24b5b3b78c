package sandbox

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestPreparePauseRoot(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("one"), 0o700); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	prog := filepath.Join(root, pauseProgram)
	if _, err := preparePauseRoot(bin, root); err != nil {
		t.Fatalf("preparePauseRoot: %v", err)
	}
	for _, d := range []string{"proc", "dev", "sys", "etc"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("pause root lacks the mount point /%s: %v", d, err)
		}
	}
	if got := readFile(prog); got != "one" {
		t.Errorf("pause program holds %q, want %q", got, "one")
	}
	fi, err := os.Stat(prog)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("pause program: %v, mode %v, want 0755", err, fi.Mode())
	}

	// Unchanged: the file is kept, not replaced.
	var before, after uint64
	before = inode(t, prog)
	if _, err := preparePauseRoot(bin, root); err != nil {
		t.Fatalf("preparePauseRoot again: %v", err)
	}
	if after = inode(t, prog); after != before {
		t.Errorf("pause program replaced (inode %d, was %d) although the binary did not change", after, before)
	}

	// Changed: replaced by a new file, so running sandboxes keep the old.
	if err := os.WriteFile(bin, []byte("two!"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := preparePauseRoot(bin, root); err != nil {
		t.Fatalf("preparePauseRoot after a change: %v", err)
	}
	if got := readFile(prog); got != "two!" {
		t.Errorf("pause program holds %q, want %q", got, "two!")
	}
	if inode(t, prog) == before {
		t.Error("pause program overwritten in place, want a new file renamed over it")
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, ".pause-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left in the pause root: %q", leftovers)
	}

	if _, err := preparePauseRoot(filepath.Join(dir, "nope"), root); err == nil {
		t.Error("preparePauseRoot(missing binary) = nil, want an error")
	}
}

// inode returns path's inode number.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// TestWaitPauseReadyBounded: a PID whose process never says it is ready
// (here the test itself, as under a PID namespace staticlet does not share)
// holds StartSandbox up for pauseReadyWait only, with no error; a caller
// that gives up still gets its error.
func TestWaitPauseReadyBounded(t *testing.T) {
	r := &Runtime{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	if err := r.waitPauseReady(context.Background(), uint32(os.Getpid())); err != nil {
		t.Errorf("waiting for a process that never becomes ready: %v, want nil after %s", err, pauseReadyWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.waitPauseReady(ctx, uint32(os.Getpid())); err == nil {
		t.Error("waiting with a cancelled context: nil, want its error")
	}
}
