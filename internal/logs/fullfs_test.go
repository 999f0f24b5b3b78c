package logs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// TestWriterShortWrite fills a small tmpfs through a Writer: the file
// keeps the whole records that fit, never part of one, and the gap
// counts the lines of the chunk that did not.
func TestWriterShortWrite(t *testing.T) {
	tier.Integration(t, "a tmpfs mount")
	if os.Geteuid() != 0 {
		tier.Missing(t, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		tier.Missing(t, fmt.Sprintf("mounting a tmpfs: %v", err))
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "0.log")
	var gaps []Gap
	w, err := NewWriter(WriterConfig{Path: path, Now: (&clock{now: t0}).Now, Dropped: func(g Gap) { gaps = append(gaps, g) }})
	if err != nil {
		t.Fatal(err)
	}
	// 20000 lines of 20 bytes and more, in chunks of 400 lines: far more
	// than 64 KiB, and the chunk that meets the end is taken in part.
	var chunk bytes.Buffer
	lines := 0
	for i := range 20000 {
		fmt.Fprintf(&chunk, "line %06d .........\n", i)
		if (i+1)%400 == 0 {
			w.Feed(Stdout, chunk.Bytes())
			chunk.Reset()
		}
		lines++
	}
	w.Close()
	got := readRecords(t, path) // fails on a line cut short
	if len(got) == 0 || len(got) == lines {
		t.Fatalf("%d records written of %d lines, want some, not all", len(got), lines)
	}
	for i, r := range got {
		if want := fmt.Sprintf("line %06d .........", i); r.content != want {
			t.Fatalf("record %d = %q, want %q: the records kept are the first ones, whole", i, r.content, want)
		}
	}
	// The gap starts with the lines of the chunk that were cut off.
	if cut := 400 - len(got)%400; len(gaps) != 1 || int(gaps[0].Lines) != cut {
		t.Errorf("gaps = %+v, want one starting with the %d lines cut off (%d written of %d)", gaps, cut, len(got), lines)
	}
}
