package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestIgnored(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"pod.yaml", false},
		{"pod.json", false},
		{"etcd", false},
		{"4913.yaml", false},
		{"tmp.yaml", false},
		{".pod.yaml", true},
		{".pod.yaml.swp", true},
		{"pod.yaml.swp", true},
		{"pod.yaml.swx", true},
		{"pod.yaml~", true},
		{"4913", true},
		{"pod.yaml.tmp", true},
		{"pod.yaml.dpkg-old", true},
		{"pod.yaml.dpkg-new", true},
		{"pod.yaml.dpkg-dist", true},
		{"pod.yaml.dpkg-tmp", true},
	}
	for _, tt := range tests {
		if got := ignored(tt.name); got != tt.want {
			t.Errorf("ignored(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReadLimited(t *testing.T) {
	tests := []struct {
		name    string
		content string
		max     int64
		wantErr string
	}{
		{"under", "123456789", 10, ""},
		{"at the limit", "1234567890", 10, ""},
		{"over", "12345678901", 10, "file is 11 bytes, over the 10-byte limit"},
		{"empty", "", 10, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			data, fp, err := readLimited(p, tt.max)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readLimited(%q) error = %v, want %q", tt.content, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(data) != tt.content {
				t.Fatalf("readLimited(%q) = %q, %v, want the content", tt.content, data, err)
			}
			if fp == (fingerprint{}) {
				t.Errorf("readLimited(%q) fingerprint is zero", tt.content)
			}
		})
	}
}

func TestDirName(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/etc/kubernetes/manifests", "dir:/etc/kubernetes/manifests"},
		{"/etc/kubernetes/manifests/", "dir:/etc/kubernetes/manifests"},
		{"/etc/kubernetes/etcd.yaml", "dir:/etc/kubernetes/etcd.yaml"},
	}
	for _, tt := range tests {
		if got := NewDir(DirConfig{Path: tt.path}).Name(); got != tt.want {
			t.Errorf("NewDir(%q).Name() = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestScanRereadsSecretSources: a file whose Secret fills a key from
// another file is decoded again at every listing, though the manifest is
// untouched: a new value of that file is seen, an unreadable one is an
// error on the manifest that clears once it is readable again, and a
// listing that finds nothing new makes no new snapshot.
func TestScanRereadsSecretSources(t *testing.T) {
	root := t.TempDir()
	dir, key := filepath.Join(root, "m"), filepath.Join(root, "tls.key")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeKey := func(v string) {
		t.Helper()
		if err := os.WriteFile(key, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKey("one")
	manifest := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n  annotations: {staticlet.io/secret-files: tls.key=" + key + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "tls.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	decode := func(path string, data []byte) (*pod.Manifest, error) {
		return pod.DecodeFile(path, data, pod.Options{NodeName: "n", ReadData: func(src pod.DataSource) ([]byte, error) {
			return os.ReadFile(src.Name)
		}})
	}
	d := NewDir(DirConfig{Path: dir, Resync: time.Hour, Decode: decode})
	// list lists the directory and returns the key's value, whether the
	// file is in error, and the snapshot's version.
	list := func() (string, bool, snapVersion) {
		t.Helper()
		snap := d.scan()
		if len(snap.Files) != 1 || len(snap.Files[0].Objects) != 1 {
			t.Fatalf("snapshot %+v, want one file with one object", snap)
		}
		f := snap.Files[0]
		return string(f.Objects[0].Secret.Data["tls.key"]), f.Err != nil, d.version(snap)
	}
	steps := []struct {
		do      func()
		want    string // the value in force
		failing bool   // the file in error
		changed bool   // a new snapshot
	}{
		{nil, "one", false, true},
		{nil, "one", false, false},
		{func() { writeKey("two") }, "two", false, true},
		{nil, "two", false, false},
		{func() { os.Remove(key) }, "two", true, true},
		{nil, "two", true, false},
		{func() { writeKey("three") }, "three", false, true},
	}
	var last snapVersion
	for i, s := range steps {
		if s.do != nil {
			s.do()
		}
		got, failing, v := list()
		if got != s.want || failing != s.failing {
			t.Errorf("step %d: tls.key = %q, in error %v; want %q, %v", i, got, failing, s.want, s.failing)
		}
		if changed := !v.equal(last); changed != s.changed {
			t.Errorf("step %d: a new snapshot %v, want %v", i, changed, s.changed)
		}
		last = v
	}
}
