package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPrepareHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(dir, "missing")
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	tests := []struct {
		name    string
		path    string
		typ     *v1.HostPathType
		wantErr string
		check   func(t *testing.T, path string)
	}{
		{name: "unset: anything, even missing", path: missing},
		{name: "unset type string", path: missing, typ: typ(v1.HostPathUnset)},
		{name: "DirectoryOrCreate makes it", path: filepath.Join(dir, "new", "deep"), typ: typ(v1.HostPathDirectoryOrCreate),
			check: isMode(os.ModeDir | 0o755)},
		{name: "DirectoryOrCreate existing", path: dir, typ: typ(v1.HostPathDirectoryOrCreate)},
		{name: "DirectoryOrCreate on a file", path: file, typ: typ(v1.HostPathDirectoryOrCreate), wantErr: "not a directory"},
		{name: "FileOrCreate makes it", path: filepath.Join(dir, "newdir", "f"), typ: typ(v1.HostPathFileOrCreate),
			check: isMode(0o644)},
		{name: "FileOrCreate existing", path: file, typ: typ(v1.HostPathFileOrCreate)},
		{name: "FileOrCreate on a directory", path: dir, typ: typ(v1.HostPathFileOrCreate), wantErr: "is a directory"},
		{name: "Directory", path: dir, typ: typ(v1.HostPathDirectory)},
		{name: "Directory missing", path: missing, typ: typ(v1.HostPathDirectory), wantErr: "not a directory"},
		{name: "Directory on a file", path: file, typ: typ(v1.HostPathDirectory), wantErr: "not a directory"},
		{name: "File", path: file, typ: typ(v1.HostPathFile)},
		{name: "File on a directory", path: dir, typ: typ(v1.HostPathFile), wantErr: "not a file"},
		{name: "Socket", path: sock, typ: typ(v1.HostPathSocket)},
		{name: "Socket on a file", path: file, typ: typ(v1.HostPathSocket), wantErr: "not a socket"},
		{name: "CharDevice", path: "/dev/null", typ: typ(v1.HostPathCharDev)},
		{name: "CharDevice on a file", path: file, typ: typ(v1.HostPathCharDev), wantErr: "not a character device"},
		{name: "BlockDevice on a char device", path: "/dev/null", typ: typ(v1.HostPathBlockDev), wantErr: "not a block device"},
		{name: "BlockDevice missing", path: missing, typ: typ(v1.HostPathBlockDev), wantErr: "not a block device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := prepareHostPath(&v1.HostPathVolumeSource{Path: tt.path, Type: tt.typ})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.path) {
					t.Errorf("prepareHostPath(%s) = %v, want an error naming the path and containing %q", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepareHostPath(%s) = %v, want nil", tt.path, err)
			}
			if tt.check != nil {
				tt.check(t, tt.path)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("stat %s: %v, want it never created", missing, err)
	}
}

// isMode checks that a path exists with the given type and permissions
// (as the process umask allows them).
func isMode(want os.FileMode) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		if fi.Mode().Type() != want.Type() || fi.Mode().Perm()&^want.Perm() != 0 {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
}
