package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
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
	byID := shimSocket("", addr, ns, "abc")
	if want := "/run/containerd/s/"; filepath.Dir(byID)+"/" != want || len(filepath.Base(byID)) != 64 {
		t.Errorf("shimSocket(no bundle) = %q, want a SHA-256 under %s", byID, want)
	}
	grouped := t.TempDir()
	if err := os.WriteFile(filepath.Join(grouped, "config.json"), []byte(`{"annotations":{"`+shimGroup+`":"sandbox1"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := shimSocket(grouped, addr, ns, "abc"), shimSocket("", addr, ns, "sandbox1"); got != want {
		t.Errorf("shimSocket(grouped bundle) = %q, want the group's %q", got, want)
	}
	known := t.TempDir()
	if err := os.WriteFile(filepath.Join(known, "address"), []byte("unix:///run/containerd/s/feed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := shimSocket(known, addr, ns, "abc"); got != "/run/containerd/s/feed" {
		t.Errorf("shimSocket(bundle with an address file) = %q, want the file's path", got)
	}
	if got := shimSocket("", addr, ns, ""); got != "" {
		t.Errorf("shimSocket(nothing) = %q, want none", got)
	}
}

func TestOwnLease(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	expire := map[string]string{gcExpireLabel: now.Add(time.Hour).Format(time.RFC3339)}
	tests := []struct {
		name string
		l    leases.Lease
		want bool
	}{
		{"labelled as staticlet's", leases.Lease{ID: "x", Labels: map[string]string{LabelLease: "container"}, CreatedAt: now}, true},
		{"named as staticlet's", leases.Lease{ID: leaseIDPrefix + "pull-1", CreatedAt: now}, true},
		{"the client's default, old", leases.Lease{ID: "1", Labels: expire, CreatedAt: now.Add(-2 * anonymousLeaseAge)}, true},
		{"the client's default, recent: another tool's call may be in flight", leases.Lease{ID: "2", Labels: expire, CreatedAt: now.Add(-time.Minute)}, false},
		{"another tool's, labelled", leases.Lease{ID: "3", Labels: map[string]string{gcExpireLabel: "x", "tool": "y"}, CreatedAt: now.Add(-48 * time.Hour)}, false},
		{"no labels", leases.Lease{ID: "4", CreatedAt: now.Add(-48 * time.Hour)}, false},
	}
	for _, tt := range tests {
		if got := ownLease(tt.l, now); got != tt.want {
			t.Errorf("%s: ownLease(%+v) = %v, want %v", tt.name, tt.l, got, tt.want)
		}
	}
}
