package filewatch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fsOp is one change to the files under a test's root (names are
// relative to it): do says what, arg is the content, link target or new
// name.
type fsOp struct {
	do, name, arg string
	mode          os.FileMode
}

func write(name, data string) fsOp     { return fsOp{do: "write", name: name, arg: data} }
func symlink(name, target string) fsOp { return fsOp{do: "symlink", name: name, arg: target} }
func symlinkAbs(name, target string) fsOp {
	return fsOp{do: "symlink to the root's", name: name, arg: target}
}
func mkdir(name string) fsOp                   { return fsOp{do: "mkdir", name: name} }
func rename(from, to string) fsOp              { return fsOp{do: "rename", name: from, arg: to} }
func remove(name string) fsOp                  { return fsOp{do: "remove", name: name} }
func touch(name string) fsOp                   { return fsOp{do: "touch", name: name} }
func chmod(name string, mode os.FileMode) fsOp { return fsOp{do: "chmod", name: name, mode: mode} }
func mkfifo(name string) fsOp                  { return fsOp{do: "mkfifo", name: name} }

func (o fsOp) apply(root string) error {
	path := filepath.Join(root, o.name)
	switch o.do {
	case "write":
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(o.arg), 0o644)
	case "symlink":
		return os.Symlink(o.arg, path)
	case "symlink to the root's":
		return os.Symlink(filepath.Join(root, o.arg), path)
	case "mkdir":
		return os.MkdirAll(path, 0o755)
	case "rename":
		return os.Rename(path, filepath.Join(root, o.arg))
	case "remove":
		return os.RemoveAll(path)
	case "touch":
		later := time.Now().Add(time.Hour)
		return os.Chtimes(path, later, later)
	case "chmod":
		return os.Chmod(path, o.mode)
	case "mkfifo":
		return syscall.Mkfifo(path, 0o644)
	}
	return errors.New("unknown operation")
}

// configMap lays out dir the way the kubelet's atomic writer does: the
// files in a timestamped directory, "..data" linking to it, and a link per
// file through "..data".
func configMap(dir, version, data string) []fsOp {
	return []fsOp{
		write(dir+"/.."+version+"/config", data),
		symlink(dir+"/..data", ".."+version),
		symlink(dir+"/config", "..data/config"),
	}
}

// swapConfigMap updates such a directory as the atomic writer does.
func swapConfigMap(dir, from, to, data string) []fsOp {
	return []fsOp{
		write(dir+"/.."+to+"/config", data),
		symlink(dir+"/..data_tmp", ".."+to),
		rename(dir+"/..data_tmp", dir+"/..data"),
		remove(dir + "/.." + from),
	}
}

// run applies ops in order.
func run(t *testing.T, root string, ops ...[]fsOp) {
	t.Helper()
	for _, o := range slices.Concat(ops...) {
		if err := o.apply(root); err != nil {
			t.Fatalf("%s %s %s: %v", o.do, o.name, o.arg, err)
		}
	}
}

// fp fingerprints path, failing the test if it takes long (a FIFO read).
func fp(t *testing.T, path string, lim limits) snapshot {
	t.Helper()
	type result struct {
		s   snapshot
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := fingerprint(path, lim)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("fingerprint(%s) error: %v", path, r.err)
		}
		return r.s
	case <-time.After(10 * time.Second):
		t.Fatalf("fingerprint(%s) did not return", path)
		return snapshot{}
	}
}

func TestFingerprintChanges(t *testing.T) {
	lim := limits{maxEntries: 100, maxBytes: 1 << 20}
	tests := []struct {
		name    string
		before  []fsOp
		path    string // watched, under the root
		change  []fsOp
		changed bool
		absent  bool // after the change
	}{
		{name: "file rewritten", before: []fsOp{write("f", "v1")}, path: "f", change: []fsOp{write("f", "v2")}, changed: true},
		{name: "file rewritten the same", before: []fsOp{write("f", "v1")}, path: "f", change: []fsOp{write("f", "v1")}},
		{name: "file touched", before: []fsOp{write("f", "v1")}, path: "f", change: []fsOp{touch("f")}},
		{name: "file chmod", before: []fsOp{write("f", "v1")}, path: "f", change: []fsOp{chmod("f", 0o600)}},
		{name: "file renamed over", before: []fsOp{write("f", "v1")}, path: "f",
			change: []fsOp{write(".f.swp", "v2"), rename(".f.swp", "f")}, changed: true},
		{name: "file removed", before: []fsOp{write("f", "v1")}, path: "f", change: []fsOp{remove("f")}, changed: true, absent: true},
		{name: "missing file appears", path: "a/b/f", change: []fsOp{write("a/b/f", "")}, changed: true},
		{name: "dangling link is missing", before: []fsOp{symlink("f", "nowhere")}, path: "f", change: []fsOp{remove("f")}, absent: true},
		{name: "link to a file retargeted to the same content",
			before: []fsOp{write("x", "v1"), write("y", "v1"), symlink("f", "x")}, path: "f",
			change: []fsOp{remove("f"), symlink("f", "y")}},
		{name: "config map file swapped", before: configMap("cm", "1", "v1"), path: "cm/config",
			change: swapConfigMap("cm", "1", "2", "v2"), changed: true},
		{name: "fifo not read", before: []fsOp{mkfifo("p")}, path: "p", change: []fsOp{touch("p")}},

		{name: "file in a directory rewritten", before: []fsOp{write("d/a", "v1")}, path: "d",
			change: []fsOp{write("d/a", "v2")}, changed: true},
		{name: "file in a directory touched and chmod", before: []fsOp{write("d/a", "v1")}, path: "d",
			change: []fsOp{touch("d/a"), chmod("d/a", 0o600), chmod("d", 0o700)}},
		{name: "file added deep in a directory", before: []fsOp{write("d/a", "v1")}, path: "d",
			change: []fsOp{write("d/x/y/b", "")}, changed: true},
		{name: "empty directory added", before: []fsOp{write("d/a", "v1")}, path: "d",
			change: []fsOp{mkdir("d/e")}, changed: true},
		{name: "file in a directory renamed", before: []fsOp{write("d/a", "v1")}, path: "d",
			change: []fsOp{rename("d/a", "d/b")}, changed: true},
		{name: "file in a directory removed", before: []fsOp{write("d/a", "v1"), write("d/b", "v1")}, path: "d",
			change: []fsOp{remove("d/b")}, changed: true},
		{name: "config map directory swapped", before: configMap("cm", "1", "v1"), path: "cm",
			change: swapConfigMap("cm", "1", "2", "v2"), changed: true},
		{name: "inside link followed", before: []fsOp{write("d/a", "v1"), symlink("d/l", "a")}, path: "d",
			change: []fsOp{remove("d/l"), write("d/l", "v1")}},
		{name: "absolute link not followed", before: []fsOp{write("out", "v1"), mkdir("d"), symlinkAbs("d/l", "out")}, path: "d",
			change: []fsOp{write("out", "v2")}},
		{name: "absolute link retargeted", before: []fsOp{mkdir("d"), symlink("d/l", "/etc/a")}, path: "d",
			change: []fsOp{remove("d/l"), symlink("d/l", "/etc/b")}, changed: true},
		{name: "link out of the directory counts by its text", before: []fsOp{write("out", "v1"), mkdir("d"), symlink("d/l", "../out")}, path: "d",
			change: []fsOp{write("out", "v2")}},
		{name: "link cycle", before: []fsOp{write("d/a", "v1"), symlink("d/self", "."), symlink("d/up", "..")}, path: "d",
			change: []fsOp{write("d/a", "v2")}, changed: true},
		{name: "fifo in a directory not read", before: []fsOp{mkdir("d"), mkfifo("d/p")}, path: "d", change: []fsOp{write("d/a", "")}, changed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			run(t, root, tt.before)
			path := filepath.Join(root, tt.path)
			before := fp(t, path, lim)
			run(t, root, tt.change)
			after := fp(t, path, lim)
			if changed := before.digest != after.digest; changed != tt.changed {
				t.Errorf("fingerprint changed = %v, want %v", changed, tt.changed)
			}
			if after.digest.present == tt.absent {
				t.Errorf("after: present = %v, want %v", after.digest.present, !tt.absent)
			}
			if len(before.problems)+len(after.problems) > 0 {
				t.Errorf("problems: %q, %q", before.problems, after.problems)
			}
		})
	}
}

func TestFingerprintLimits(t *testing.T) {
	tests := []struct {
		name    string
		lim     limits
		before  []fsOp
		path    string
		change  []fsOp
		changed bool
	}{
		{name: "a change past the bytes bound is not seen", lim: limits{maxEntries: 10, maxBytes: 4},
			before: []fsOp{write("f", "0123456789")}, path: "f", change: []fsOp{write("f", "0123456780")}},
		{name: "a change within the bytes bound is", lim: limits{maxEntries: 10, maxBytes: 4},
			before: []fsOp{write("f", "0123456789")}, path: "f", change: []fsOp{write("f", "x123456789")}, changed: true},
		{name: "a change past the entries bound is not seen", lim: limits{maxEntries: 2, maxBytes: 100},
			before: []fsOp{write("d/a", ""), write("d/b", ""), write("d/c", "")}, path: "d", change: []fsOp{write("d/c", "x")}},
		{name: "a change within the entries bound is", lim: limits{maxEntries: 2, maxBytes: 100},
			before: []fsOp{write("d/a", ""), write("d/b", ""), write("d/c", "")}, path: "d", change: []fsOp{write("d/a", "x")}, changed: true},
		{name: "a directory's bytes bound", lim: limits{maxEntries: 10, maxBytes: 4},
			before: []fsOp{write("d/a", "012"), write("d/b", "345")}, path: "d", change: []fsOp{write("d/b", "3xx")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			run(t, root, tt.before)
			path := filepath.Join(root, tt.path)
			before := fp(t, path, tt.lim)
			run(t, root, tt.change)
			after := fp(t, path, tt.lim)
			if changed := before.digest != after.digest; changed != tt.changed {
				t.Errorf("fingerprint changed = %v, want %v", changed, tt.changed)
			}
			if len(after.problems) == 0 || !strings.Contains(after.problems[0], "only the first") {
				t.Errorf("problems = %q, want the bound named", after.problems)
			}
		})
	}
}

func TestFingerprintDirs(t *testing.T) {
	tests := []struct {
		name   string
		before []fsOp
		path   string
		want   []string // relative to the root, "." for the root
	}{
		{name: "file", before: []fsOp{write("a/f", "")}, path: "a/f", want: []string{"a"}},
		{name: "missing file", before: []fsOp{mkdir("a")}, path: "a/b/c/f", want: []string{"a"}},
		{name: "directory tree", before: []fsOp{write("a/d/x/f", ""), mkdir("a/d/y")}, path: "a/d",
			want: []string{"a", "a/d", "a/d/x", "a/d/y"}},
		{name: "link to a file elsewhere", before: []fsOp{write("real/f", ""), mkdir("a"), symlink("a/f", "../real/f")}, path: "a/f",
			want: []string{"a", "real"}},
		{name: "linked directory on the way", before: []fsOp{write("real/f", ""), mkdir("a"), symlink("a/d", "../real")}, path: "a/d/f",
			want: []string{"a", "real"}},
		{name: "config map file", before: configMap("cm", "1", ""), path: "cm/config", want: []string{"cm", "cm/..1"}},
		{name: "config map directory, links not watched twice", before: configMap("cm", "1", ""), path: "cm",
			want: []string{".", "cm", "cm/..1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			run(t, root, tt.before)
			s := fp(t, filepath.Join(root, tt.path), limits{maxEntries: 100, maxBytes: 100})
			var got []string
			for dir := range s.dirs {
				rel, err := filepath.Rel(root, dir)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("watches %s, outside the test's directory", dir)
					continue
				}
				got = append(got, rel)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("fingerprint(%s) watches %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestFingerprintPseudoFS(t *testing.T) {
	if pseudoFS("/proc") != "proc" {
		t.Skip("no proc file system at /proc")
	}
	lim := limits{maxEntries: 100, maxBytes: 1 << 20}
	// /proc/self/stat changes between any two reads.
	for _, path := range []string{"/proc/self", "/proc/self/stat"} {
		first, second := fp(t, path, lim), fp(t, path, lim)
		if !first.digest.present || first.digest != second.digest {
			t.Errorf("fingerprint(%s) = %v then %v, want the same, present", path, first.digest, second.digest)
		}
		if len(first.problems) != 1 || !strings.Contains(first.problems[0], "proc") {
			t.Errorf("fingerprint(%s) problems = %q, want proc named", path, first.problems)
		}
	}
}
