// Package bench holds the benchmarks of make bench: the built staticlet
// against a private containerd, each figure beside what the containerd Go
// client does for the same container in the same run (start and stop
// latency, many pods, etcd from kubeadm's manifest, probes, footprint and
// idle CPU), so that the ratios mean something on any machine. Nothing
// asserts a timing. TestRawProber checks the plain prober the probe
// benchmarks compare against.
//
// They need what the end-to-end tests need (root, containerd, runc,
// busybox; test/e2e) and STATICLET_BIN (make bench sets it; without it
// one is built from the module root).
package bench
