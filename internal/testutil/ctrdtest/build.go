package ctrdtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/staticlet/staticlet/internal/testutil/modbuild"
)

// Release is a containerd release the tests can run against besides the
// distribution's daemon, built from its Go module on first use.
type Release struct {
	// Series is what STATICLET_TEST_CONTAINERD names it by: "1.7", "2.4".
	Series string
	// Version is the module version pinned for the series.
	Version string
	// Module is the module path of the release's commands.
	Module string
}

// Major is the release's major version, which decides its config format.
func (r Release) Major() int {
	major, _, _ := strings.Cut(strings.TrimPrefix(r.Version, "v"), ".")
	n, _ := strconv.Atoi(major) // Releases holds only valid versions; TestReleases checks
	return n
}

// Releases are the pinned containerd releases: the newest 1.7 and the
// newest 2.x release the module proxy served when they were pinned
// (go list -m -versions). Debian's 1.6 is the third daemon tested, and the
// default. make test runs the containerd tests once for each.
var Releases = []Release{
	{Series: "1.7", Version: "v1.7.35", Module: "github.com/containerd/containerd"},
	{Series: "2.4", Version: "v2.4.2", Module: "github.com/containerd/containerd/v2"},
}

// CacheDir holds the built releases, one directory per version with the
// daemon and its runc shim, kept between test runs and shared by every
// checkout on the machine.
const CacheDir = "/var/cache/staticlet-test/containerd"

// Binary names inside a release's directory.
const (
	containerdName = "containerd"
	shimName       = "containerd-shim-runc-v2"
)

// buildTags leave out what staticlet's tests do not use and what would need
// C headers or host tools: btrfs (cgo and libbtrfs headers), devmapper, zfs
// and aufs snapshotters, CRI, and tracing. The daemon config disables the
// same plugins for the distribution's daemon, which has them built in.
const buildTags = "no_btrfs no_devmapper no_zfs no_aufs no_cri no_tracing"

// Build returns the directory under CacheDir holding r's containerd and
// containerd-shim-runc-v2, building both from the module proxy first if
// they are not there (package modbuild: once per machine however many test
// processes ask, the directory complete once it exists).
func Build(ctx context.Context, r Release) (string, error) {
	dir := filepath.Join(CacheDir, r.Version)
	if err := modbuild.Build(ctx, dir, r.recipe()); err != nil {
		return "", fmt.Errorf("building containerd %s: %w", r.Version, err)
	}
	return dir, nil
}

// complete reports whether dir holds both binaries of a release.
func complete(dir string) bool {
	return modbuild.Complete(dir, containerdName, shimName)
}

// recipe builds r's daemon and runc shim, with the version set as release
// builds set it, so that Env.Version names the release rather than
// "<version>+unknown".
func (r Release) recipe() modbuild.Recipe {
	var rec modbuild.Recipe
	for _, name := range []string{containerdName, shimName} {
		pkg := r.Module + "/cmd/" + name
		rec.Require = append(rec.Require, pkg+"@"+r.Version)
		rec.Commands = append(rec.Commands, modbuild.Command{Name: name, Package: pkg})
	}
	rec.Tags = buildTags
	rec.LDFlags = "-s -w -X " + r.Module + "/version.Version=" + r.Version
	return rec
}
