package diskpressure

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The signals staticlet watches, with the kubelet's names.
const (
	// SignalAvailable is the bytes available to unprivileged users on
	// the filesystem.
	SignalAvailable = "nodefs.available"
	// SignalInodesFree is the inodes free on it.
	SignalInodesFree = "nodefs.inodesFree"
)

// Threshold is one signal's hard eviction threshold: a fraction of the
// filesystem (of its bytes or of its inodes), or an amount (bytes, or
// inodes). The zero Threshold is off: it is never crossed.
type Threshold struct {
	// Fraction is the least share of the filesystem, from 0 to 1; used
	// when Amount is 0.
	Fraction float64
	// Amount is the least number of bytes or inodes.
	Amount uint64
	// Text is the threshold as given ("10%", "1Gi"), for messages.
	Text string
}

// Percent is the threshold of p percent of the filesystem.
func Percent(p float64) Threshold {
	return Threshold{Fraction: p / 100, Text: strconv.FormatFloat(p, 'f', -1, 64) + "%"}
}

// crossed tells whether observed, of total, is under t.
func (t Threshold) crossed(observed, total uint64) bool {
	switch {
	case t.Amount > 0:
		return observed < t.Amount
	case t.Fraction > 0:
		return float64(observed)/float64(total) < t.Fraction
	}
	return false
}

// Thresholds are the hard eviction thresholds of the signals staticlet
// watches: under one, on any filesystem, the node is under disk pressure.
// The zero Thresholds check nothing.
type Thresholds struct {
	// Available is nodefs.available's threshold.
	Available Threshold
	// InodesFree is nodefs.inodesFree's; it is not checked on a
	// filesystem that reports no inode count.
	InodesFree Threshold
}

// DefaultThresholds are the kubelet's default hard eviction thresholds
// for nodefs: nodefs.available<10%, nodefs.inodesFree<5%.
var DefaultThresholds = Thresholds{Available: Percent(10), InodesFree: Percent(5)}

// DefaultEvictionHard is DefaultThresholds as the kubelet's evictionHard
// map, a new one each call.
func DefaultEvictionHard() map[string]string {
	return map[string]string{SignalAvailable: DefaultThresholds.Available.Text, SignalInodesFree: DefaultThresholds.InodesFree.Text}
}

// MergeDefaults is m with DefaultEvictionHard's signals added where m
// does not name them: the kubelet's mergeDefaultEvictionSettings.
func MergeDefaults(m map[string]string) map[string]string {
	out := DefaultEvictionHard()
	maps.Copy(out, m)
	return out
}

// unwatched tells whether name is one of the kubelet's eviction signals
// that staticlet does not watch: memory, the image and container
// filesystems, process IDs.
func unwatched(name string) bool {
	switch name {
	case "memory.available", "allocatableMemory.available", "imagefs.available", "imagefs.inodesFree",
		"containerfs.available", "containerfs.inodesFree", "pid.available":
		return true
	}
	return false
}

// SplitEvictionHard reads the kubelet's --eviction-hard syntax,
// comma-separated signal<value items (spaces around each part allowed),
// into a map; a later item for a signal wins. It does not check the
// signals or values: ParseThresholds does.
func SplitEvictionHard(s string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "<")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, "<>=") || strings.ContainsAny(value, "<>=") {
			return nil, fmt.Errorf("%q: want signal<value, such as nodefs.available<10%% (< is the only operator)", item)
		}
		out[name] = value
	}
	return out, nil
}

// ParseThresholds reads evictionHard, a map of signal to value as the
// kubelet's, into the thresholds of the signals staticlet watches, a
// signal the map does not name being off. A value is a percentage from
// 0% to 100% or a quantity (bytes for nodefs.available, 1Gi; inodes for
// nodefs.inodesFree, 100k); 0, 0% and, as with the kubelet, 100% turn a
// signal off. It returns too the kubelet's other signals the map names,
// sorted: they are valid and have no effect here. An unknown signal or a
// bad value is an error naming the item.
func ParseThresholds(evictionHard map[string]string) (Thresholds, []string, error) {
	var th Thresholds
	var others []string
	for _, name := range slices.Sorted(maps.Keys(evictionHard)) {
		value := evictionHard[name]
		t, err := parseThreshold(value)
		if err != nil {
			return Thresholds{}, nil, fmt.Errorf("%s<%s: %w", name, value, err)
		}
		switch {
		case name == SignalAvailable:
			th.Available = t
		case name == SignalInodesFree:
			th.InodesFree = t
		case unwatched(name):
			others = append(others, name)
		default:
			return Thresholds{}, nil, fmt.Errorf("%s<%s: unknown eviction signal %q", name, value, name)
		}
	}
	return th, others, nil
}

// parseThreshold reads one value: a percentage or a quantity.
func parseThreshold(value string) (Threshold, error) {
	if p, ok := strings.CutSuffix(value, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return Threshold{}, fmt.Errorf("want a percentage from 0%% to 100%%")
		}
		if f == 0 || f == 100 {
			return Threshold{}, nil
		}
		return Threshold{Fraction: f / 100, Text: value}, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() < 0 {
		return Threshold{}, fmt.Errorf("want a percentage (10%%) or a quantity that is not negative (1Gi, 500Mi, 1000)")
	}
	if q.IsZero() {
		return Threshold{}, nil
	}
	return Threshold{Amount: uint64(q.Value()), Text: value}, nil
}

// amount formats n, of bytes or inodes, in the unit family of threshold
// text: binary (Ki, Mi, Gi...) when it ends in one, decimal (k, M, G...)
// when it has a suffix, a plain number otherwise. It keeps one decimal,
// rounded down as percent does.
func amount(n uint64, text string) string {
	base, units := 1000.0, []string{"", "k", "M", "G", "T", "P", "E"}
	switch {
	case strings.HasSuffix(text, "i"):
		base, units = 1024, []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	case text == "" || strings.IndexFunc(text, func(r rune) bool { return r < '0' || r > '9' }) < 0:
		return strconv.FormatUint(n, 10)
	}
	v, i := float64(n), 0
	for v >= base && i < len(units)-1 {
		v, i = v/base, i+1
	}
	s := fmt.Sprintf("%.1f", math.Floor(v*10)/10)
	return strings.TrimSuffix(s, ".0") + units[i]
}
