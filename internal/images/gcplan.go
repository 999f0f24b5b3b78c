package images

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The kubelet's defaults for GCPolicy.
const (
	DefaultGCHighThresholdPercent = 85
	DefaultGCLowThresholdPercent  = 80
	DefaultGCMinimumAge           = 2 * time.Minute
	// DefaultGCPeriod is how often the kubelet collects images.
	DefaultGCPeriod = 5 * time.Minute
)

// GCPolicy is the kubelet's image garbage collection settings.
type GCPolicy struct {
	// HighThresholdPercent is the image filesystem's usage at or above
	// which unused images are removed (imageGCHighThresholdPercent).
	HighThresholdPercent int
	// LowThresholdPercent is the usage that removing for space stops at
	// (imageGCLowThresholdPercent).
	LowThresholdPercent int
	// MinAge is how long an image stays on the node before it may be
	// removed for space (imageMinimumGCAge).
	MinAge time.Duration
	// MaxAge, when nonzero, removes an unused image not used for longer,
	// whatever the usage (imageMaximumGCAge).
	MaxAge time.Duration
}

// DefaultGCPolicy is the kubelet's: 85%, 80%, 2m, no maximum age.
func DefaultGCPolicy() GCPolicy {
	return GCPolicy{
		HighThresholdPercent: DefaultGCHighThresholdPercent,
		LowThresholdPercent:  DefaultGCLowThresholdPercent,
		MinAge:               DefaultGCMinimumAge,
	}
}

// Validate checks p as the kubelet validates its configuration.
func (p GCPolicy) Validate() error {
	var errs []error
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("imageGCHighThresholdPercent (--image-gc-high-threshold) %d must be between 0 and 100, inclusive", p.HighThresholdPercent))
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be between 0 and 100, inclusive", p.LowThresholdPercent))
	}
	if p.LowThresholdPercent >= p.HighThresholdPercent {
		errs = append(errs, fmt.Errorf("imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %d", p.LowThresholdPercent, p.HighThresholdPercent))
	}
	if p.MinAge < 0 {
		errs = append(errs, fmt.Errorf("imageMinimumGCAge (--image-minimum-gc-age) %v must not be negative", p.MinAge))
	}
	if p.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("imageMaximumGCAge (--image-maximum-gc-age) %v must not be negative", p.MaxAge))
	}
	if p.MaxAge > 0 && p.MaxAge <= p.MinAge {
		errs = append(errs, fmt.Errorf("imageMaximumGCAge (--image-maximum-gc-age) %v must be greater than imageMinimumGCAge (--image-minimum-gc-age) %v", p.MaxAge, p.MinAge))
	}
	return errors.Join(errs...)
}

// Reasons an image is kept whatever its age and the disk's usage, as
// "staticlet get images" shows them.
const (
	// KeptInUse: a container in staticlet's namespace (running or not)
	// was made from it.
	KeptInUse = "in use"
	// KeptManifest: a current manifest names it, whatever its pod's state.
	KeptManifest = "manifest"
	// KeptImportFile: the file it was imported from is still in the import
	// directory (it would only be imported again).
	KeptImportFile = "import file"
)

// Reasons an image is removed, as the kubelet's
// kubelet_image_garbage_collected_total labels them.
const (
	RemovedAge   = "age"
	RemovedSpace = "space"
)

// gcImage is one image, by digest, as a collection sees it.
type gcImage struct {
	// Digest is its manifest's (or index's) digest; all its Names share it.
	Digest string
	Names  []string
	// Size is its content's size, what removing it is counted to free.
	Size int64
	// LastUsed is when a container last used it; for one never used, when
	// it came to the node.
	LastUsed time.Time
	// Created is when it came to the node (the oldest of its names).
	Created time.Time
	// Kept are the reasons it is kept; none when it may go.
	Kept []string
}

// fsUsage is the image filesystem's size and free space, in bytes; a zero
// Capacity is unknown.
type fsUsage struct {
	Capacity  int64
	Available int64
}

// removal is an image a collection removes, and why.
type removal struct {
	Image  gcImage
	Reason string // RemovedAge or RemovedSpace
}

// gcInput is what planGC decides from.
type gcInput struct {
	Policy GCPolicy
	Images []gcImage
	Usage  fsUsage
	Now    time.Time
	// Began is when collection began in this process: as the kubelet,
	// nothing is removed for age before MaxAge has passed since.
	Began time.Time
}

// planGC decides which images to remove, as the kubelet does: an image
// that is kept (in use, named by a manifest, its import file present) never
// goes. With MaxAge set, and MaxAge passed since Began, every other image
// not used for longer than MaxAge goes. Then, when the usage is at or above
// the high threshold, the others go, least recently used first (then
// oldest first), skipping those on the node for less than MinAge, until
// what they free (their sizes) brings the usage down to the low threshold.
func planGC(in gcInput) []removal {
	var out []removal
	var rest []gcImage
	for _, img := range in.Images {
		switch {
		case len(img.Kept) > 0:
		case in.Policy.MaxAge > 0 && in.Now.Sub(in.Began) > in.Policy.MaxAge && in.Now.Sub(img.LastUsed) > in.Policy.MaxAge:
			out = append(out, removal{Image: img, Reason: RemovedAge})
		default:
			rest = append(rest, img)
		}
	}
	toFree := spaceToFree(in.Policy, in.Usage)
	for _, r := range out {
		toFree -= r.Image.Size
	}
	if toFree <= 0 {
		return out
	}
	slices.SortStableFunc(rest, func(a, b gcImage) int {
		return cmp.Or(a.LastUsed.Compare(b.LastUsed), a.Created.Compare(b.Created), cmp.Compare(a.Digest, b.Digest))
	})
	for _, img := range rest {
		if toFree <= 0 {
			break
		}
		if in.Now.Sub(img.Created) < in.Policy.MinAge {
			continue
		}
		out = append(out, removal{Image: img, Reason: RemovedSpace})
		toFree -= img.Size
	}
	return out
}

// spaceToFree is how many bytes to free for space: none below the high
// threshold, else what brings the usage to the low one. The usage is
// computed as the kubelet does, in whole percent rounded up. A high
// threshold of 100 with no maximum age turns collection off, as the
// kubelet does.
func spaceToFree(p GCPolicy, u fsUsage) int64 {
	if u.Capacity <= 0 || (p.HighThresholdPercent == 100 && p.MaxAge == 0) {
		return 0
	}
	usagePercent := 100 - int(u.Available*100/u.Capacity)
	if usagePercent < p.HighThresholdPercent {
		return 0
	}
	return u.Capacity*int64(100-p.LowThresholdPercent)/100 - u.Available
}
