// Package diskpressure tells whether the node is short of disk where
// staticlet writes: the filesystems of --root-dir and of the pod logs
// directory, the kubelet's "nodefs". It compares what statfs says of each
// with the kubelet's default hard eviction thresholds (nodefs.available
// under 10%, nodefs.inodesFree under 5%) and reports the DiskPressure
// condition when one is crossed, and when it clears.
//
// It only observes: unlike the kubelet, staticlet evicts no pod under
// disk pressure (a static pod the kubelet evicts is never started again).
// What frees space is the node-wide log budget (package logs) and the
// operator.
//
// Evaluate is the pure decision, tested as a table; Monitor runs it on
// statfs at an interval. Monitor.Run owns its one goroutine (the caller's)
// and returns when its context ends. It knows no pods.
package diskpressure
