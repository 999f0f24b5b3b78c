package harness

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FilesOnDisk reads every regular file under dir, by path, without going
// into tmpfs mounts: what is there is on no disk. The secret tests look
// for planted values in what it returns.
func FilesOnDisk(t *testing.T, dir string) map[string]string {
	t.Helper()
	fsTypes := map[string]string{} // by mount point
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if sep := slices.Index(f, "-"); sep > 4 && sep+1 < len(f) {
			fsTypes[f[4]] = f[sep+1]
		}
	}
	out := map[string]string{}
	err = filepath.WalkDir(dir, func(path string, ent fs.DirEntry, err error) error {
		fsType, mounted := fsTypes[path]
		switch {
		case err != nil:
			return err
		case ent.IsDir() && fsType == "tmpfs":
			return fs.SkipDir
		case !ent.Type().IsRegular() || mounted:
			// A file mounted on is a namespace's pin, no data.
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return out
}
