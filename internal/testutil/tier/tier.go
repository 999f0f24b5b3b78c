// Package tier says which tier of the test suite runs, and what a test does
// when the machine lacks one of its real dependencies (root, containerd,
// busybox, dbus-daemon, debootstrap, a C compiler...).
//
// The unit tier is `go test -short` (make unit): no root, no containerd, no
// machine set up by hand, so every test that needs one of those skips there,
// whatever the environment says. In every other tier a missing dependency
// skips the test on a developer's machine and fails it with CI=true, where
// the machine is expected to be complete (.ci/run installs it all).
//
// It holds no state; its functions are safe for concurrent use.
package tier

import (
	"os"
	"testing"
)

// Unit reports whether this run is the unit tier (go test -short).
func Unit() bool { return testing.Short() }

// CI reports whether the environment says this is CI (CI=true), where every
// dependency must be present.
func CI() bool { return os.Getenv("CI") == "true" }

// Integration skips t in the unit tier, saying what it needs: call it first
// in a test, or in a helper every such test calls, that needs more than the
// unit tier has.
func Integration(t testing.TB, needs string) {
	t.Helper()
	if Unit() {
		t.Skipf("needs %s: not in the unit tier (go test -short)", needs)
	}
}

// Missing ends t for a dependency it lacks, described by msg: skipped in the
// unit tier and off CI, failed with CI=true.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Unit() || !CI() {
		t.Skip(msg)
	}
	t.Fatal(msg)
}
