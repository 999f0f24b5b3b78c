package images

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestGCPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		policy GCPolicy
		want   string // a part of the error; "" for none
	}{
		{name: "defaults", policy: DefaultGCPolicy()},
		{name: "max age", policy: GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: time.Hour}},
		{name: "high 100 low 0", policy: GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 0}},
		{name: "high over 100", policy: GCPolicy{HighThresholdPercent: 101, LowThresholdPercent: 80}, want: "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100"},
		{name: "low negative", policy: GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: -1}, want: "imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100"},
		{name: "low equal high", policy: GCPolicy{HighThresholdPercent: 80, LowThresholdPercent: 80}, want: "must be less than imageGCHighThresholdPercent"},
		{name: "low above high", policy: GCPolicy{HighThresholdPercent: 70, LowThresholdPercent: 80}, want: "must be less than"},
		{name: "negative min age", policy: GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second}, want: "imageMinimumGCAge"},
		{name: "negative max age", policy: GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: -time.Second}, want: "imageMaximumGCAge (--image-maximum-gc-age) -1s must not be negative"},
		{name: "max age not above min age", policy: GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: time.Minute}, want: "must be greater than imageMinimumGCAge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%+v.Validate() = %v, want nil", tt.policy, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("%+v.Validate() = %v, want an error with %q", tt.policy, err, tt.want)
			}
		})
	}
}

func TestPlanGC(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	// img is an image of size MiB, last used and on the node since the
	// given times before now, kept for the given reasons.
	img := func(digest string, mib int64, lastUsed, created time.Duration, kept ...string) gcImage {
		return gcImage{Digest: digest, Size: mib << 20, LastUsed: ago(lastUsed), Created: ago(created), Kept: kept}
	}
	const gib = 1 << 30
	under := fsUsage{Capacity: 100 * gib, Available: 50 * gib} // 50% used
	// at90 is 90% used: 10 GiB to free for the low threshold 80%.
	at90 := fsUsage{Capacity: 100 * gib, Available: 10 * gib}
	defaults := DefaultGCPolicy()
	maxAge := defaults
	maxAge.MaxAge = time.Minute
	tests := []struct {
		name   string
		policy GCPolicy
		usage  fsUsage
		began  time.Duration // before now
		images []gcImage
		want   []string // digest:reason, in order
	}{
		{
			name: "under the threshold, no max age: nothing", policy: defaults, usage: under, began: time.Hour,
			images: []gcImage{img("a", 10, 24*time.Hour, 48*time.Hour)},
		},
		{
			name: "max age: the unused old image goes, kept ones stay whatever their age", policy: maxAge, usage: under, began: time.Hour,
			images: []gcImage{
				img("old", 10, 2*time.Minute, time.Hour),
				img("recent", 10, 30*time.Second, time.Hour),
				img("running", 10, time.Hour, time.Hour, KeptInUse),
				img("completed-never-pod", 10, time.Hour, time.Hour, KeptManifest),
				img("archive", 10, time.Hour, time.Hour, KeptImportFile),
			},
			want: []string{"old:age"},
		},
		{
			name: "max age: nothing before max age has passed since collection began", policy: maxAge, usage: under, began: 30 * time.Second,
			images: []gcImage{img("old", 10, time.Hour, time.Hour)},
		},
		{
			name: "max age exactly reached: kept", policy: maxAge, usage: under, began: time.Hour,
			images: []gcImage{img("edge", 10, time.Minute, time.Hour)},
		},
		{
			name: "over the threshold: least recently used first, until the low threshold", policy: defaults, usage: at90, began: time.Hour,
			images: []gcImage{
				img("used-1h", 6<<10, time.Hour, 48*time.Hour),
				img("used-3h", 6<<10, 3*time.Hour, 48*time.Hour),
				img("used-2h", 6<<10, 2*time.Hour, 48*time.Hour),
			},
			want: []string{"used-3h:space", "used-2h:space"},
		},
		{
			name: "over the threshold: same last use, oldest first", policy: defaults, usage: at90, began: time.Hour,
			images: []gcImage{
				img("young", 20<<10, time.Hour, 3*time.Hour),
				img("old", 20<<10, time.Hour, 5*time.Hour),
			},
			want: []string{"old:space"},
		},
		{
			name: "over the threshold: younger than the minimum age and kept ones stay", policy: defaults, usage: at90, began: time.Hour,
			images: []gcImage{
				img("new", 20<<10, time.Minute, time.Minute),
				img("in-use", 20<<10, 48*time.Hour, 48*time.Hour, KeptInUse),
				img("named", 20<<10, 48*time.Hour, 48*time.Hour, KeptManifest),
				img("small", 1<<10, time.Hour, time.Hour),
			},
			want: []string{"small:space"},
		},
		{
			name: "at the threshold exactly: collects", policy: defaults, usage: fsUsage{Capacity: 100 * gib, Available: 15 * gib}, began: time.Hour,
			images: []gcImage{img("a", 1<<10, time.Hour, time.Hour), img("b", 10<<10, 2*time.Hour, 2*time.Hour)},
			want:   []string{"b:space"},
		},
		{
			name: "age removals count toward the space to free", policy: maxAge, usage: at90, began: time.Hour,
			images: []gcImage{
				img("ancient", 12<<10, 10*time.Hour, 10*time.Hour),
				img("recent", 12<<10, 30*time.Second, 10*time.Hour),
			},
			want: []string{"ancient:age"},
		},
		{
			name: "high threshold 100, no max age: off even when full", policy: GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 80}, began: time.Hour,
			usage:  fsUsage{Capacity: 100 * gib, Available: 0},
			images: []gcImage{img("a", 10, time.Hour, time.Hour)},
		},
		{
			name: "high threshold 100 with a max age: for space only when full", policy: GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 80, MaxAge: 48 * time.Hour}, began: time.Hour,
			usage:  fsUsage{Capacity: 100 * gib, Available: 0},
			images: []gcImage{img("a", 10, time.Hour, time.Hour)},
			want:   []string{"a:space"},
		},
		{
			name: "unknown usage: only age", policy: maxAge, usage: fsUsage{}, began: time.Hour,
			images: []gcImage{img("old", 10, time.Hour, time.Hour)},
			want:   []string{"old:age"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planGC(gcInput{Policy: tt.policy, Images: tt.images, Usage: tt.usage, Now: now, Began: ago(tt.began)})
			var gotS []string
			for _, r := range got {
				gotS = append(gotS, r.Image.Digest+":"+r.Reason)
			}
			if fmt.Sprint(gotS) != fmt.Sprint(tt.want) {
				t.Errorf("planGC = %v, want %v", gotS, tt.want)
			}
		})
	}
}
