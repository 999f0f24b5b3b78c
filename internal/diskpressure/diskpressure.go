package diskpressure

import (
	"fmt"
	"math"
	"strings"
)

// Thresholds are the fractions of a filesystem below which the node is
// under disk pressure.
type Thresholds struct {
	// Available is the least fraction of bytes available to unprivileged
	// users (the kubelet's nodefs.available).
	Available float64
	// InodesFree is the least fraction of inodes free (the kubelet's
	// nodefs.inodesFree); ignored on a filesystem that reports no inode
	// count.
	InodesFree float64
}

// DefaultThresholds are the kubelet's default hard eviction thresholds
// for nodefs: nodefs.available<10%, nodefs.inodesFree<5%.
var DefaultThresholds = Thresholds{Available: 0.10, InodesFree: 0.05}

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
	// Observed and Threshold are fractions.
	Observed, Threshold float64
}

// String says the signal as the status shows it, for example
// "/var/lib/staticlet: nodefs.available 3.2% < 10%".
func (s Signal) String() string {
	return fmt.Sprintf("%s: %s %s < %s", strings.Join(s.Paths, ", "), s.Name, percent(s.Observed), percent(s.Threshold))
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
		if u.Bytes > 0 {
			if avail := float64(u.Available) / float64(u.Bytes); avail < th.Available {
				out = append(out, Signal{Name: "nodefs.available", Paths: u.Paths, Observed: avail, Threshold: th.Available})
			}
		}
		if u.Inodes > 0 {
			if free := float64(u.InodesFree) / float64(u.Inodes); free < th.InodesFree {
				out = append(out, Signal{Name: "nodefs.inodesFree", Paths: u.Paths, Observed: free, Threshold: th.InodesFree})
			}
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
