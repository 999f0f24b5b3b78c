package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread of its own that is in the network namespace
// pinned (or otherwise found) at path, such as /proc/<pid>/ns/net, and
// returns fn's error. Sockets fn creates stay in that namespace after Do
// returns, so a connection dialled in fn can be used from any goroutine.
//
// fn must do its work on the calling goroutine: a goroutine it starts runs
// in the host's namespace. A net.Dialer with a literal IP address and
// FallbackDelay < 0 dials on the calling goroutine.
func Do(path string, fn func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := doOnThread(target, fn)
		// A thread that could not go back to the host's namespace is never
		// unlocked: Go ends it with this goroutine.
		if restored {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// doOnThread moves the calling locked thread into target's network
// namespace, runs fn, and moves the thread back. It reports whether the
// thread is back in its own namespace.
func doOnThread(target *os.File, fn func() error) (restored bool, err error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return true, fmt.Errorf("opening the current network namespace: %w", err)
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("entering network namespace %s: %w", target.Name(), err)
	}
	defer func() {
		if serr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); serr != nil {
			err = errors.Join(err, fmt.Errorf("returning to the host's network namespace: %w", serr))
			return
		}
		restored = true
	}()
	return false, fn()
}
