package lease

import (
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
)

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
