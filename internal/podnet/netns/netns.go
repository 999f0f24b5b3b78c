// Package netns creates the namespaces a pod's containers share (network,
// IPC, UTS) and pins each to a file, so that they exist before any of the
// pod's processes and outlive all of them until they are removed. It is the
// only staticlet package that locks OS threads or changes a thread's
// namespaces.
//
// Pinning first lets a pod's app containers be created before or beside its
// sandbox, each joining the namespaces by path, and makes the network
// namespace the pod's own object rather than a side effect of a process.
// Create and Remove are safe for concurrent use on different directories.
//
// It also owns the pod network's host side, all through netlink: the
// bridge with the pods' gateway addresses, a veth pair per pod (the pod's
// eth0 with its addresses and default routes), forwarding, and the
// nftables table with masquerade and hostPort rules. It decides no
// addresses (package ipam does) and keeps no state: what it made is found
// again by name (VethName) and by rule comment.
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kind names a namespace type by its /proc/<pid>/ns file name.
type Kind string

// The namespaces staticlet pins for a pod.
const (
	Net Kind = "net"
	IPC Kind = "ipc"
	UTS Kind = "uts"
)

var cloneFlags = map[Kind]uintptr{Net: unix.CLONE_NEWNET, IPC: unix.CLONE_NEWIPC, UTS: unix.CLONE_NEWUTS}

// Spec says which namespaces to create.
type Spec struct {
	// Dir receives one file per namespace, named after its Kind.
	Dir string
	// Kinds are the namespaces to create.
	Kinds []Kind
	// Hostname is set in a new UTS namespace.
	Hostname string
}

// Path returns where namespace k of a pod pinned in dir is.
func Path(dir string, k Kind) string { return filepath.Join(dir, string(k)) }

// Create makes new namespaces of the kinds asked for, brings up loopback in
// a new network namespace, and pins each under s.Dir. On failure nothing of
// it is left.
func Create(s Spec) (err error) {
	if len(s.Kinds) == 0 {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("creating namespace directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = Remove(s.Dir)
		}
	}()
	for _, k := range s.Kinds {
		f, err := os.OpenFile(Path(s.Dir, k), os.O_CREATE|os.O_RDONLY, 0o400)
		if err != nil {
			return fmt.Errorf("creating the pin of the %s namespace: %w", k, err)
		}
		f.Close()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := pinFromThread(s)
		// A thread that could not go back to the host's namespaces is never
		// unlocked: Go ends it with this goroutine, so no other goroutine
		// ever runs in a pod's namespaces.
		if restored {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// pinFromThread moves the calling locked thread into new namespaces, sets
// them up, bind-mounts each onto its pin, and moves the thread back to the
// namespaces it had. It reports whether the thread is back. Going back
// matters even though the thread could be thrown away: the program's main
// thread is never ended, and would otherwise keep a pod's namespaces alive.
func pinFromThread(s Spec) (restored bool, err error) {
	var flags uintptr
	for _, k := range s.Kinds {
		f, ok := cloneFlags[k]
		if !ok {
			return true, fmt.Errorf("unknown namespace kind %q", k)
		}
		flags |= f
	}
	tid := unix.Gettid()
	orig := make(map[Kind]*os.File, len(s.Kinds))
	defer func() {
		for _, f := range orig {
			f.Close()
		}
	}()
	for _, k := range s.Kinds {
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/%s", tid, k))
		if err != nil {
			return true, fmt.Errorf("opening the current %s namespace: %w", k, err)
		}
		orig[k] = f
	}
	if err := unix.Unshare(int(flags)); err != nil {
		return true, fmt.Errorf("creating namespaces: %w", err)
	}
	defer func() {
		restored = true
		for k, f := range orig {
			if serr := unix.Setns(int(f.Fd()), int(cloneFlags[k])); serr != nil {
				restored = false
				err = errors.Join(err, fmt.Errorf("returning to the host's %s namespace: %w", k, serr))
			}
		}
	}()
	return false, setUpAndPin(s, tid)
}

// setUpAndPin sets up the thread's new namespaces and pins them.
func setUpAndPin(s Spec, tid int) error {
	for _, k := range s.Kinds {
		switch k {
		case UTS:
			if s.Hostname != "" {
				if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
					return fmt.Errorf("setting the host name: %w", err)
				}
			}
		case Net:
			if err := loopbackUp(); err != nil {
				return err
			}
		}
	}
	for _, k := range s.Kinds {
		src := fmt.Sprintf("/proc/self/task/%d/ns/%s", tid, k)
		if err := unix.Mount(src, Path(s.Dir, k), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pinning the %s namespace: %w", k, err)
		}
	}
	return nil
}

// loopbackUp brings up lo in the thread's network namespace.
func loopbackUp() error {
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("opening netlink in the new network namespace: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding loopback: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing up loopback: %w", err)
	}
	return nil
}

// Remove unpins every namespace in dir and removes dir. A namespace goes
// away once no process is left in it. Removing what is not there succeeds.
func Remove(dir string) error {
	var errs []error
	for k := range cloneFlags {
		p := Path(dir, k)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", p, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing namespace directory: %w", err)
	}
	return nil
}

// Pinned tells whether dir holds a pinned namespace of kind k.
func Pinned(dir string, k Kind) bool {
	var st unix.Statfs_t
	if unix.Statfs(Path(dir, k), &st) != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}
