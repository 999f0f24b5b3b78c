// Package e2e holds the end-to-end tests: each runs the built staticlet
// binary against a private containerd (internal/testutil/ctrdtest) with
// the test image, through internal/testutil/harness, and checks what it
// does through the status socket, the CLI, a stand-in NOTIFY_SOCKET and
// containerd itself: pod lifecycle and adoption, probes, hooks,
// resources and OOM, volumes, the pod network, images and registries,
// logs, metrics, URL sources, node shutdown, faults and upgrades.
//
// They need root, containerd, runc and busybox (make deps); without them
// they skip, or fail when CI=true. STATICLET_BIN names the binary (make
// test sets it); without it one is built from the module root.
// STATICLET_TEST_CONTAINERD picks the containerd release (make
// test-containerd runs them against each). TestVM (test/vm) runs some of
// them again inside a QEMU guest, with systemd and cgroup v2.
package e2e
