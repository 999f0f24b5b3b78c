package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
