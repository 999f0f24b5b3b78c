package logd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/install"
)

// Install is what Install put under a root dir.
type Install struct {
	// Driver is the program the shim runs per container: the forwarder,
	// or where there is none for the architecture a copy of staticlet as
	// the log driver itself (logs.RunDriver).
	Driver string
	// Daemon is the program that runs the daemon: DaemonProgram beside
	// staticlet's binary, or staticlet's binary itself where there is
	// none; empty without a forwarder.
	Daemon string
	// Dir is the daemon's directory.
	Dir string
}

// DaemonProgram is the name of the daemon's own program
// (cmd/staticlet-logd), which Setup looks for beside staticlet's binary.
// It holds the daemon alone: staticlet's binary initialises its Kubernetes
// and containerd packages before main can tell it is to be the daemon,
// which leaves a long-lived process megabytes of heap and touched code
// that the daemon never uses.
const DaemonProgram = "staticlet-logd"

// Dir is the log daemon's directory under a root dir.
func Dir(rootDir string) string { return filepath.Join(rootDir, "logd") }

// Setup writes the forwarder for this architecture to
// <rootDir>/bin/log-forwarder, and where there is none copies staticlet's
// binary (exe) to <rootDir>/bin/log-driver, each renamed into place only
// when it changed, so that running ones keep their files. Under the root
// dir is where a shim in another mount namespace finds them. The daemon
// runs DaemonProgram from exe's directory, or exe itself where that is
// missing: staticlet starts it, in its own mount namespace.
func Setup(rootDir, exe string) (Install, error) {
	bin, err := filepath.Abs(filepath.Join(rootDir, "bin"))
	if err != nil {
		return Install{}, err
	}
	dir, err := filepath.Abs(Dir(rootDir))
	if err != nil {
		return Install{}, err
	}
	fwd, ok, err := Forwarder(runtime.GOARCH, SocketPath(dir))
	if err != nil {
		return Install{}, err
	}
	if !ok {
		driver := filepath.Join(bin, "log-driver")
		if err := install.File(exe, driver); err != nil {
			return Install{}, fmt.Errorf("copying the log driver program: %w", err)
		}
		return Install{Driver: driver}, nil
	}
	forwarder := filepath.Join(bin, "log-forwarder")
	if err := install.Bytes(fwd, forwarder); err != nil {
		return Install{}, fmt.Errorf("writing the log forwarder: %w", err)
	}
	return Install{Driver: forwarder, Daemon: daemonProgram(exe), Dir: dir}, nil
}

// daemonProgram is DaemonProgram beside exe when it is an executable
// file there, and exe otherwise.
func daemonProgram(exe string) string {
	own := filepath.Join(filepath.Dir(exe), DaemonProgram)
	if st, err := os.Stat(own); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return own
	}
	return exe
}

// Keep starts the log daemon of in when a container needs it, until ctx
// ends: at once, then every interval, it starts one where none runs and a
// forwarder is waiting for one (a container adopted from before, or one
// whose daemon went away), and asks a daemon running another file than
// in.Daemon (a previous build's staticlet-logd, or staticlet's binary
// itself) to go, once, and starts in.Daemon instead: its forwarders hand
// their pipes to the new one. A node with no container has no daemon: it
// exits once idle (Config.Idle), and Ensure starts it again for the next
// container. Without a daemon to run, Keep returns at once.
func Keep(ctx context.Context, in Install, interval time.Duration, logger Logger) error {
	if in.Daemon == "" {
		return nil
	}
	if err := os.MkdirAll(in.Dir, 0o700); err != nil {
		return err
	}
	replaced := false
	for {
		pid, running, err := daemonPID(in.Dir)
		switch {
		case err != nil:
			logger.Warn("looking for the log daemon", "err", err)
		case running && pid <= 0:
			// The lock holds no PID: the daemon has not written it yet,
			// or could not (a full disk). Kill(0) would signal this
			// process's group: leave that daemon be.
		case running && !replaced && !sameFile(fmt.Sprintf("/proc/%d/exe", pid), in.Daemon):
			replaced = true
			logger.Info("replacing the log daemon of another staticlet binary", "pid", pid)
			if err := replace(ctx, in, pid); err != nil {
				logger.Warn("replacing the log daemon", "err", err)
			}
		case !running && forwarderWaiting(in.Driver):
			if err := Start(in); err != nil {
				logger.Warn("starting the log daemon", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// Ensure starts the log daemon of in if none listens, and waits (5 s at
// most) until one does: staticlet calls it before a container's forwarder
// starts, so that the forwarder finds the daemon at once. A daemon that
// exits for being idle just as the forwarder arrives leaves it waiting,
// with its output in the pipes, until Keep's next round starts another.
// Without a daemon to run, it does nothing.
//
// It never takes the daemon's lock to look, as daemonPID does: a daemon
// starting meanwhile would find the lock taken and exit. One that exits
// at once all the same (it found one going away, or one starting that
// then lost to a look) is started again, a few times.
func (in Install) Ensure() error {
	if in.Daemon == "" || listening(in.Dir) {
		return nil
	}
	const limit, tries = 5 * time.Second, 5
	deadline := time.Now().Add(limit)
	for try := 1; ; try++ {
		exited, err := start(in)
		if err != nil {
			return fmt.Errorf("starting the log daemon: %w", err)
		}
		ok, gone := awaitListening(in.Dir, exited, deadline)
		switch {
		case ok:
			return nil
		case !gone:
			return fmt.Errorf("the log daemon does not listen on %s %v after it started", SocketPath(in.Dir), limit)
		case try == tries:
			return fmt.Errorf("the log daemon exited at once %d times (see %s)", tries, filepath.Join(in.Dir, logName))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitListening waits until a daemon listens on dir's socket (ok), the
// daemon just started exits (gone), or deadline passes.
func awaitListening(dir string, exited <-chan struct{}, deadline time.Time) (ok, gone bool) {
	for {
		if listening(dir) {
			return true, false
		}
		if time.Now().After(deadline) {
			return false, false
		}
		select {
		case <-exited:
			// It found the lock taken. The holder may not have its PID in
			// the lock file (a full disk): with the daemon started gone,
			// the lock tells.
			_, held, _ := daemonPID(dir)
			_, err := os.Stat(SocketPath(dir))
			return listening(dir) || held && err == nil, true
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// listening tells, without taking the lock, whether the daemon the lock
// file of dir names runs and its socket is there.
func listening(dir string) bool {
	pid := lockHolder(dir)
	if pid <= 0 || unix.Kill(pid, 0) != nil {
		return false
	}
	_, err := os.Stat(SocketPath(dir))
	return err == nil
}

// lockHolder is the PID the lock file of dir names: the daemon that last
// took the lock, 0 if none did.
func lockHolder(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, lockName))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// forwarderWaiting tells whether a process runs the forwarder program
// driver (or a previous copy of it, replaced since it started). A
// forwarder that has its daemon runs too, but Keep asks only when no
// daemon runs: every forwarder then waits for one.
func forwarderWaiting(driver string) bool {
	want := []string{driver, driver + " (deleted)"}
	if real, err := filepath.EvalSymlinks(driver); err == nil && real != driver {
		want = append(want, real, real+" (deleted)")
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe")); err == nil && slices.Contains(want, exe) {
			return true
		}
	}
	return false
}

// replace asks daemon pid to go, waits (15 s at most) until it went, and
// starts the new one.
func replace(ctx context.Context, in Install, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, running, err := daemonPID(in.Dir); err == nil && !running {
			return Start(in)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("log daemon %d still running 15 s after SIGTERM", pid)
}

// Start starts the daemon of in, detached: in a session of its own, its
// output appended to daemon.log. A daemon that finds another one running
// exits at once.
func Start(in Install) error {
	_, err := start(in)
	return err
}

// start is Start, returning a channel closed when the daemon exits.
func start(in Install) (<-chan struct{}, error) {
	out, err := os.OpenFile(filepath.Join(in.Dir, logName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(in.Daemon, "log-daemon", in.Dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Reaped by this process while it runs, by init after.
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return exited, nil
}

// daemonPID tells whether a daemon holds dir's lock, and its PID.
func daemonPID(dir string) (int, bool, error) {
	f, free, err := tryLock(filepath.Join(dir, lockName), unix.LOCK_EX)
	if err != nil {
		return 0, false, err
	}
	if free {
		f.Close()
		return 0, false, nil
	}
	return lockHolder(dir), true, nil
}

// DaemonPID returns the PID of the daemon of dir, 0 when none runs.
func DaemonPID(dir string) int {
	pid, running, err := daemonPID(dir)
	if err != nil || !running {
		return 0
	}
	return pid
}

// sameFile tells whether paths a and b are the same file.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
