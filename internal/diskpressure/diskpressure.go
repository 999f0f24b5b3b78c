package diskpressure

import (
	"fmt"
	"math"
	"strings"
)

// Usage is what statfs says of one filesystem, and the directories of
// staticlet's that are on it.
type Usage struct {
	// Paths are the directories on the filesystem (--root-dir, the pod
	// logs directory), in the order they were given.
	Paths []string
	// Bytes is its size; Available, the bytes an unprivileged user may
	// still write.
	Bytes, Available uint64
	// Inodes is its inode count (0 where it reports none); InodesFree,
	// those free.
	Inodes, InodesFree uint64
}

// Signal is one threshold crossed on one filesystem.
type Signal struct {
	// Name is the kubelet's name of the signal: nodefs.available or
	// nodefs.inodesFree.
	Name string
	// Paths are the directories on the filesystem.
	Paths []string
	// Observed is what the filesystem has of the signal's resource
	// (bytes available, inodes free), of Total.
	Observed, Total uint64
	// Threshold is the one crossed.
	Threshold Threshold
}

// String says the signal as the status shows it, the threshold as it
// was given and what was observed in its terms: for example
// "/var/lib/staticlet: nodefs.available 3.2% < 10%", or
// "/var/lib/staticlet: nodefs.available 120.5Mi < 1Gi".
func (s Signal) String() string {
	observed := percent(float64(s.Observed) / float64(s.Total))
	if s.Threshold.Amount > 0 {
		observed = amount(s.Observed, s.Threshold.Text)
	}
	return fmt.Sprintf("%s: %s %s < %s", strings.Join(s.Paths, ", "), s.Name, observed, s.Threshold.Text)
}

// percent formats f, a fraction, as a percentage with one decimal where
// it has one, rounded down: just under a threshold does not print as it.
func percent(f float64) string {
	s := fmt.Sprintf("%.1f", math.Floor(f*1000)/10)
	return strings.TrimSuffix(s, ".0") + "%"
}

// Evaluate returns the thresholds of th that the filesystems fs cross, in
// their order: the node is under disk pressure when there is any. A
// filesystem of size 0 (one statfs could not read) crosses none.
func Evaluate(fs []Usage, th Thresholds) []Signal {
	var out []Signal
	for _, u := range fs {
		if u.Bytes > 0 && th.Available.crossed(u.Available, u.Bytes) {
			out = append(out, Signal{Name: SignalAvailable, Paths: u.Paths, Observed: u.Available, Total: u.Bytes, Threshold: th.Available})
		}
		if u.Inodes > 0 && th.InodesFree.crossed(u.InodesFree, u.Inodes) {
			out = append(out, Signal{Name: SignalInodesFree, Paths: u.Paths, Observed: u.InodesFree, Total: u.Inodes, Threshold: th.InodesFree})
		}
	}
	return out
}

// Message says signals in one line: what the DiskPressure condition's
// message holds while it is true.
func Message(signals []Signal) string {
	parts := make([]string, len(signals))
	for i, s := range signals {
		parts[i] = s.String()
	}
	return strings.Join(parts, "; ")
}
