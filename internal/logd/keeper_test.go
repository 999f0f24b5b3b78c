package logd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// testDaemonEnv makes the test binary run as the log daemon program when
// started as `log-daemon DIR`, as staticlet's binary does where
// staticlet-logd is missing.
const testDaemonEnv = "STATICLET_LOGD_TEST_DAEMON"

func TestMain(m *testing.M) {
	if os.Getenv(testDaemonEnv) == "1" && len(os.Args) == 3 && os.Args[1] == "log-daemon" {
		os.Exit(RunDaemon(os.Args[2]))
	}
	os.Exit(m.Run())
}

// TestKeepOnDemand: Keep starts no daemon while no container needs one and
// starts one for a forwarder that waits; that daemon exits once the
// container's log ended and it was idle, and Keep leaves it gone; Ensure,
// called before the next container's forwarder starts, starts one again,
// and that container's output reaches its log.
func TestKeepOnDemand(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	in := h.install()
	t.Setenv(IdleEnv, "300ms")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Keep(ctx, in, 20*time.Millisecond, discard{}) }()
	t.Cleanup(func() {
		cancel()
		<-done
		stopDaemon(t, h.dir)
	})
	// Nothing tells "did not start": Keep is given ten rounds.
	noDaemon := func(when string) {
		t.Helper()
		time.Sleep(200 * time.Millisecond)
		if pid := DaemonPID(h.dir); pid != 0 {
			t.Fatalf("a log daemon (pid %d) runs %s", pid, when)
		}
	}
	noDaemon("before any container")

	c := h.forwarder()
	fmt.Fprintln(c.out, "one")
	h.waitLines("stdout:one")
	c.out.Close()
	c.err.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("forwarder at the end of its streams: %v, want exit 0", err)
	}
	waitFor(t, "the idle daemon to exit", func() (bool, string) {
		pid := DaemonPID(h.dir)
		return pid == 0, fmt.Sprintf("pid %d", pid)
	})
	noDaemon("after the last container")

	if err := in.Ensure(); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	next := filepath.Join(filepath.Dir(h.logPath), "1.log")
	c = h.forwarderTo(next)
	fmt.Fprintln(c.out, "two")
	waitFor(t, "the next container's log", func() (bool, string) {
		got := h.linesOf(next)
		return len(got) == 1 && got[0] == "stdout:two", fmt.Sprint(got)
	})
}

// TestEnsureConcurrent: containers started together each call Ensure at
// once; every call returns once one daemon listens, and one runs.
func TestEnsureConcurrent(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	in := h.install()
	// A daemon still starting when the test ends goes soon by itself.
	t.Setenv(IdleEnv, "1s")
	t.Cleanup(func() { stopDaemon(t, h.dir) })
	errs := make(chan error, 8)
	for range cap(errs) {
		go func() { errs <- in.Ensure() }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("Ensure: %v", err)
		}
	}
	pid := DaemonPID(h.dir)
	if pid == 0 || !listening(h.dir) {
		t.Fatalf("after Ensure: daemon %d, listening %v; want one listening", pid, listening(h.dir))
	}
	if err := in.Ensure(); err != nil || DaemonPID(h.dir) != pid {
		t.Errorf("Ensure with a daemon running = %v, daemon %d; want nil and the same daemon %d", err, DaemonPID(h.dir), pid)
	}
	c := h.forwarder()
	fmt.Fprintln(c.out, "one")
	h.waitLines("stdout:one")
}

// install is what Setup would give for h's forwarder, with the test binary
// as the daemon program (TestMain), and the daemon's directory made.
func (h *harness) install() Install {
	h.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	h.t.Setenv(testDaemonEnv, "1")
	return Install{Driver: h.prog, Daemon: exe, Dir: h.dir}
}

// stopDaemon ends the daemon of dir, if one runs, and any that takes its
// place: a daemon an Ensure started as another one listened already may
// still be starting, and takes the lock once the first one is gone.
func stopDaemon(t *testing.T, dir string) {
	t.Helper()
	waitFor(t, "no log daemon running", func() (bool, string) {
		pid := DaemonPID(dir)
		if pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		return pid == 0, fmt.Sprintf("daemon %d", pid)
	})
}

// TestForwarderWaiting: a running forwarder is found by its program, also
// once the program was replaced (as Setup does for a new build), and none
// is found once it exited.
func TestForwarderWaiting(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	if forwarderWaiting(h.prog) {
		t.Fatal("forwarderWaiting before any forwarder ran")
	}
	c := h.forwarder()
	if !forwarderWaiting(h.prog) {
		t.Error("forwarderWaiting = false while a forwarder runs")
	}
	b, err := os.ReadFile(h.prog)
	if err != nil {
		t.Fatal(err)
	}
	tmp := h.prog + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, h.prog); err != nil {
		t.Fatal(err)
	}
	if !forwarderWaiting(h.prog) {
		t.Error("forwarderWaiting = false while a forwarder of the replaced program runs")
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
	if forwarderWaiting(h.prog) {
		t.Error("forwarderWaiting = true once the forwarder exited")
	}
}
