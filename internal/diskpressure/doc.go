// Package diskpressure tells whether the node is short of disk where
// staticlet writes: the filesystems of --root-dir and of the pod logs
// directory, the kubelet's "nodefs". It compares what statfs says of each
// with the hard eviction thresholds of nodefs.available and
// nodefs.inodesFree (by default the kubelet's: under 10% and under 5%),
// and reports the DiskPressure condition when one is crossed, and when
// it clears. It also reads those thresholds in the kubelet's syntax
// (--eviction-hard, evictionHard), where the kubelet's other signals are
// valid names without effect.
//
// It only observes: unlike the kubelet, staticlet evicts no pod under
// disk pressure (a static pod the kubelet evicts is never started again).
// What frees space is the node-wide log budget (package logs) and the
// operator.
//
// Evaluate and the parsing of thresholds are pure, tested as tables; Monitor runs it on
// statfs at an interval. Monitor.Run owns its one goroutine (the caller's)
// and returns when its context ends. It knows no pods.
package diskpressure
