// Package soak holds the soak test of make soak: the built staticlet
// against a private containerd for a chosen time (SOAK_DURATION, default
// an hour through make) at 100 pods with churn (manifest edits, crash
// loops, failing liveness probes, image imports, kill -9 of staticlet,
// restarts of containerd), sampling what could leak (staticlet's memory,
// goroutines and open files, containerd's objects, shims, mounts,
// cgroups, pod directories, log bytes) and failing on growth beyond
// noise. It prints the slope of every series at the end.
//
// It needs what the end-to-end tests need (root, containerd, runc,
// busybox; test/e2e) and STATICLET_BIN (make soak sets it; without it one
// is built from the module root). Without SOAK_DURATION it skips, so that
// go test ./... and make test do not run it; the rule that decides what is
// growth, and the numbers of the last hour's run, are in
// docs/design/soak.md.
package soak
