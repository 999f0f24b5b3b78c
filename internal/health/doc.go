// Package health runs the liveness, readiness and startup probes of
// running containers (exec, httpGet, tcpSocket and grpc handlers) with the
// kubelet's semantics: initial delay, period, timeout, success and failure
// thresholds, and startup gating liveness and readiness.
//
// A Manager owns one goroutine per probe of each container it is told
// about through Set; Run starts them and returns only once all have
// exited. Workers report verdicts (results after thresholds, and the
// output of each failed run) as data on the channel Verdicts returns; the
// package takes no action on a container itself: the reconciler decides.
// It reaches containers only through the Runtime it is given, declared
// here, and imports no other staticlet package than pod.
package health
