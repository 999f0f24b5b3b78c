package logd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// Keep keeps a log daemon running for in until ctx ends: at once, then
// every interval. A daemon running another file than in.Daemon (a
// previous build's staticlet-logd, or staticlet's binary itself) is asked
// to go, once, and replaced: its forwarders hand their pipes to the new
// one. While Keep runs, the daemon does not
// exit for being idle. Without a daemon to run, Keep returns at once.
func Keep(ctx context.Context, in Install, interval time.Duration, logger Logger) error {
	if in.Daemon == "" {
		return nil
	}
	if err := os.MkdirAll(in.Dir, 0o700); err != nil {
		return err
	}
	agent, err := os.OpenFile(filepath.Join(in.Dir, agentLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer agent.Close()
	if err := unix.Flock(int(agent.Fd()), unix.LOCK_SH); err != nil {
		return fmt.Errorf("locking %s: %w", agent.Name(), err)
	}
	replaced := false
	for {
		pid, running, err := daemonPID(in.Dir)
		switch {
		case err != nil:
			logger.Warn("looking for the log daemon", "err", err)
		case running && pid <= 0:
			// The lock holds no PID: the daemon could not write it (a
			// full disk). Kill(0) would signal this process's group:
			// leave that daemon be.
		case running && !replaced && !sameFile(fmt.Sprintf("/proc/%d/exe", pid), in.Daemon):
			replaced = true
			logger.Info("replacing the log daemon of another staticlet binary", "pid", pid)
			if err := replace(ctx, in, pid); err != nil {
				logger.Warn("replacing the log daemon", "err", err)
			}
		case !running:
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
	out, err := os.OpenFile(filepath.Join(in.Dir, logName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(in.Daemon, "log-daemon", in.Dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	// Reaped by this process while it runs, by init after.
	go func() { _ = cmd.Wait() }()
	return nil
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
	b, err := os.ReadFile(filepath.Join(dir, lockName))
	if err != nil {
		return 0, true, err
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, true, nil
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
