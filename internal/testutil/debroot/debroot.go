// Package debroot builds Debian root file systems for tests and caches what
// tests make of them, so that a machine test (systemd-nspawn) or a VM test
// (QEMU) pays for debootstrap once per recipe, not once per run.
//
// It owns two things. Debootstrap installs the host's own release from the
// host's own apt mirror (read from /etc/apt/sources.list and
// sources.list.d), so tests need no network beyond what apt already uses.
// Cached owns CacheDir, outside the repository: one directory per entry,
// named by the caller after a hash of its recipe (so a changed recipe is a
// new entry), built at most once across processes under a lock file of its
// own, into a temporary directory that is renamed into place only when the
// build succeeded, so that a killed build never leaves a half entry. It does
// not decide what goes into a root or an entry: callers do.
//
// Require skips a test, or fails it with CI=true, when this machine cannot
// build roots (and what the test adds to them). Its functions are safe for
// concurrent use, also by several processes.
package debroot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// CacheDir holds the cache entries between test runs.
const CacheDir = "/var/cache/staticlet-test"

// lockPoll is how often Cached retries a lock another process holds: a
// build takes minutes, so there is no hurry.
const lockPoll = 250 * time.Millisecond

// Hash names a recipe: a short hex digest of its parts, for entry names.
func Hash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:6])
}

// Cached returns the directory of the cache entry name, calling build to
// fill it first unless it exists. build gets an empty temporary directory
// in CacheDir, which becomes the entry when build returns nil; any other
// process asking for the same entry meanwhile waits for it. Waiting for the
// lock ends with ctx; build should watch ctx too.
func Cached(ctx context.Context, name string, build func(ctx context.Context, dir string) error) (string, error) {
	entry := filepath.Join(CacheDir, name)
	// A complete entry is the only thing ever renamed to its name.
	if _, err := os.Stat(entry); err == nil {
		return entry, nil
	}
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("creating the cache %s: %w", CacheDir, err)
	}
	unlock, err := lock(ctx, entry+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(entry); err == nil {
		return entry, nil // built by whoever held the lock
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("looking up cache entry %s: %w", entry, err)
	}
	// What a killed build left: nobody else builds this entry while we
	// hold its lock.
	stale, _ := filepath.Glob(filepath.Join(CacheDir, "."+name+".build-*"))
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("removing the unfinished build %s: %w", dir, err)
		}
	}
	tmp, err := os.MkdirTemp(CacheDir, "."+name+".build-")
	if err != nil {
		return "", fmt.Errorf("creating a build directory for %s: %w", name, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := build(ctx, tmp); err != nil {
		return "", fmt.Errorf("building cache entry %s: %w", name, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("building cache entry %s: %w", name, err)
	}
	if err := os.Rename(tmp, entry); err != nil {
		return "", fmt.Errorf("moving cache entry %s into place: %w", name, err)
	}
	return entry, nil
}

// lock takes an exclusive lock on path, polling until it gets it or ctx is
// done, and returns the function that releases it.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			// Closing the file releases the lock.
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock %s (another test builds it): %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// Require skips the test, or fails it when the environment variable CI is
// "true", unless it runs as root and finds debootstrap and tools in PATH;
// the message says to install packages.
func Require(t testing.TB, packages string, tools ...string) {
	t.Helper()
	tier.Integration(t, "root and debootstrap")
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range append([]string{"debootstrap"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("needs %s (apt-get install %s)", strings.Join(missing, ", "), packages)
	tier.Missing(t, msg)
}

// Debootstrap installs Debian suite, variant minbase plus packages (and
// what they depend on), into root, an empty or missing directory, from the
// host's apt mirror for suite.
func Debootstrap(ctx context.Context, root, suite string, packages []string) error {
	mirror, err := HostMirror(suite)
	if err != nil {
		return err
	}
	args := []string{"--variant=minbase"}
	if len(packages) > 0 {
		args = append(args, "--include="+strings.Join(packages, ","))
	}
	args = append(args, suite, root, mirror)
	out, err := exec.CommandContext(ctx, "debootstrap", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("debootstrap %s into %s: %w\n%s", suite, root, err, LastLines(string(out), 30))
	}
	return nil
}

// LastLines returns at most n last lines of s, for a report of what a
// command or a machine printed.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
