package ctrdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
// containerd-shim-runc-v2, building both first if they are not there. A file
// lock per version makes concurrent test processes build it once; the build
// happens in a temp dir renamed into place, so the directory, once it
// exists, is complete.
//
// It builds them as dependencies of a throwaway module generated in a temp
// dir: containerd's own module has replace directives, which go install
// refuses, and building from a module of staticlet's own would put the
// daemon's dependencies into staticlet's go.mod.
func Build(ctx context.Context, r Release) (string, error) {
	dir := filepath.Join(CacheDir, r.Version)
	if complete(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("creating containerd cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(CacheDir, r.Version+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(dir) { // built by another process while we waited
		return dir, nil
	}
	tmp, err := os.MkdirTemp(CacheDir, ".build-"+r.Version+"-")
	if err != nil {
		return "", fmt.Errorf("creating build dir for containerd %s: %w", r.Version, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	if err := buildInto(ctx, r, filepath.Join(tmp, "mod"), out); err != nil {
		return "", fmt.Errorf("building containerd %s: %w", r.Version, err)
	}
	if err := os.Rename(out, dir); err != nil {
		return "", fmt.Errorf("moving containerd %s into %s: %w", r.Version, dir, err)
	}
	return dir, nil
}

// complete reports whether dir holds both binaries of a release.
func complete(dir string) bool {
	for _, name := range []string{containerdName, shimName} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// lockFile takes an exclusive flock on path, waiting for it, and returns
// the function that releases it. The kernel releases it too when the
// process dies, so a killed build blocks no later one.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// buildInto generates a module in modDir that requires r, and builds r's
// daemon and runc shim into outDir.
func buildInto(ctx context.Context, r Release, modDir, outDir string) error {
	if err := os.MkdirAll(modDir, 0o755); err != nil {
		return fmt.Errorf("creating module dir: %w", err)
	}
	// go get raises the go line to what the release needs.
	gomod := "module staticlet.test/containerd-build\n\ngo 1.21\n"
	if err := os.WriteFile(filepath.Join(modDir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return fmt.Errorf("writing go.mod: %w", err)
	}
	pkgs := []string{r.Module + "/cmd/" + containerdName, r.Module + "/cmd/" + shimName}
	get := []string{"get"}
	for _, p := range pkgs {
		get = append(get, p+"@"+r.Version)
	}
	if err := goCommand(ctx, modDir, get...); err != nil {
		return err
	}
	// The version, as release builds set it, so Env.Version names the
	// release rather than "<version>+unknown".
	ldflags := "-s -w -X " + r.Module + "/version.Version=" + r.Version
	build := append([]string{"build", "-trimpath", "-tags", buildTags, "-ldflags", ldflags, "-o", outDir + "/"}, pkgs...)
	if err := goCommand(ctx, modDir, build...); err != nil {
		return err
	}
	if !complete(outDir) {
		return fmt.Errorf("go build left no %s and %s in %s", containerdName, shimName, outDir)
	}
	return nil
}

// goCommand runs the go command in dir. Its environment keeps the build to
// the generated module (no go.work, modules resolved and go.sum written as
// needed) and to the installed toolchain, and without cgo, so no C headers
// are needed; containerd's own Makefile builds the shim the same way.
func goCommand(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod",
		"CGO_ENABLED=0",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
