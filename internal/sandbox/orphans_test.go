package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIsOwnShim(t *testing.T) {
	r := &Runtime{cfg: Config{Namespace: "staticlet", Address: "/run/containerd/containerd.sock"}}
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "staticlet", "-id", "x", "-address", "/run/containerd/containerd.sock"}, true},
		{[]string{"containerd-shim-runc-v2", "-namespace=staticlet", "-address=unix:///run/containerd/containerd.sock"}, true},
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", "/run/containerd/containerd.sock"}, false},
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "staticlet", "-address", "/tmp/other.sock"}, false},
		{[]string{"/bin/sh", "-namespace", "staticlet", "-address", "/run/containerd/containerd.sock"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := r.isOwnShim(tt.args); got != tt.want {
			t.Errorf("isOwnShim(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestShimSocket(t *testing.T) {
	const addr, ns = "/run/containerd/containerd.sock", "staticlet"
	// The runc shim's name for a group's socket: the SHA-256 of
	// address/namespace/group under /run/containerd/s.
	byID := shimSocket(nil, addr, ns, "abc")
	if want := "/run/containerd/s/"; filepath.Dir(byID)+"/" != want || len(filepath.Base(byID)) != 64 {
		t.Errorf("shimSocket(no bundle) = %q, want a SHA-256 under %s", byID, want)
	}
	bundle := func(files map[string]string) string {
		dir := t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	group := func(g string) map[string]string {
		return map[string]string{"config.json": `{"annotations":{"` + shimGroup + `":"` + g + `"}}`}
	}
	gone := filepath.Join(t.TempDir(), "gone")
	tests := []struct {
		name    string
		bundles []string
		want    string
	}{
		{"a pod's own group", []string{bundle(group("sandbox1"))}, shimSocket(nil, addr, ns, "sandbox1")},
		{"a shared group", []string{bundle(group("staticlet-besteffort-1.7.0"))}, shimSocket(nil, addr, ns, "staticlet-besteffort-1.7.0")},
		{"the first bundle gone, a later one grouped", []string{gone, bundle(nil), bundle(group("staticlet-burstable-1.7.0"))}, shimSocket(nil, addr, ns, "staticlet-burstable-1.7.0")},
		{"an address file", []string{bundle(map[string]string{"address": "unix:///run/containerd/s/feed\n"})}, "/run/containerd/s/feed"},
		{"an address file after a group", []string{bundle(group("sandbox1")), bundle(map[string]string{"address": "unix:///run/containerd/s/feed\n"})}, "/run/containerd/s/feed"},
		{"no bundle tells", []string{gone}, byID},
	}
	for _, tt := range tests {
		if got := shimSocket(tt.bundles, addr, ns, "abc"); got != tt.want {
			t.Errorf("shimSocket(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := shimSocket(nil, addr, ns, ""); got != "" {
		t.Errorf("shimSocket(nothing) = %q, want none", got)
	}
}
