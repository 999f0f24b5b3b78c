package ctrdtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/sandbox/procfs"
)

// Stop tears the daemon down and removes Dir, in this order:
//   - deletes every task (killing its processes) and container in every
//     namespace, while containerd still runs;
//   - stops containerd: SIGTERM, then SIGKILL after a timeout;
//   - has runc force-delete containers of this daemon that no shim deleted,
//     which also removes their cgroups and runc state;
//   - kills shims still running for its socket and the processes they parent;
//   - waits until every shim that served it when Stop began has exited
//     (those whose tasks were deleted exit by themselves, a moment later);
//   - reaps the exited shims and killed processes it inherited as child
//     subreaper;
//   - unmounts whatever is still mounted under Dir, deepest first, and
//     removes Dir.
//
// It carries on past failures and returns them all joined. Call it once.
func (e *Env) Stop(ctx context.Context) error {
	// Found first: a shim that exits by itself later (its tasks deleted)
	// no longer shows whose it is, and must be a zombie before the reaping
	// or it is left unreaped.
	shims := shimPIDs(e.Address)
	var errs []error
	if e.client != nil {
		errs = append(errs, e.deleteAll(ctx))
		errs = append(errs, e.client.Close())
	}
	errs = append(errs, e.stopDaemon(ctx))
	errs = append(errs, deleteRuncLeftovers(ctx, e.Dir))
	killed, err := killShims(e.Address)
	errs = append(errs, err)
	for _, pid := range shims {
		errs = append(errs, waitGone(pid, 5*time.Second))
	}
	errs = append(errs, reapZombies(func(p procfs.Proc) bool {
		return strings.HasPrefix(p.Comm, "containerd-shim") || slices.Contains(killed, p.PID)
	}))
	errs = append(errs, UnmountUnder(e.Dir))
	if err := os.RemoveAll(e.Dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", e.Dir, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping containerd at %s: %w", e.Address, err)
	}
	return nil
}

// deleteAll kills and deletes every task and deletes every container, with
// its snapshot, in every namespace, so their shims exit and unmount their
// rootfs while containerd still runs.
func (e *Env) deleteAll(ctx context.Context) error {
	if e.exitedEarly() {
		return nil
	}
	listCtx, cancel := context.WithTimeout(ctx, callTimeout)
	nss, err := e.client.NamespaceService().List(listCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	var errs []error
	for _, ns := range nss {
		nsCtx := namespaces.WithNamespace(ctx, ns)
		listCtx, cancel := context.WithTimeout(nsCtx, callTimeout)
		cs, err := e.client.Containers(listCtx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("listing containers in namespace %s: %w", ns, err))
			continue
		}
		// The pods' cgroups go once every container is gone, each
		// pod's only if all of its went: stopping a pod slice of the
		// systemd driver stops what still runs in it, with SIGTERM,
		// which a container's init without a handler ignores, and
		// systemctl waits out the scope's stop timeout (90 s by
		// default), past Stop's deadline, before systemd kills it.
		var cgroups, kept []string
		for _, c := range cs {
			podCgroup, err := deleteContainer(nsCtx, c)
			if err != nil {
				errs = append(errs, fmt.Errorf("deleting container %s/%s: %w", ns, c.ID(), err))
				kept = append(kept, podCgroup)
				continue
			}
			if !slices.Contains(cgroups, podCgroup) {
				cgroups = append(cgroups, podCgroup)
			}
		}
		for _, cg := range cgroups {
			if cg != "" && !slices.Contains(kept, cg) {
				removePodCgroup(ctx, cg)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteContainer deletes c's task, killing its processes first, then c and
// its snapshot. It returns the pod cgroup c's cgroup is in, if it knows it.
func deleteContainer(ctx context.Context, c client.Container) (podCgroup string, err error) {
	taskCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if s, serr := c.Spec(taskCtx); serr == nil && s.Linux != nil {
		podCgroup = podCgroupOf(s.Linux.CgroupsPath)
	}
	task, err := c.Task(taskCtx, nil)
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		return podCgroup, fmt.Errorf("loading task: %w", err)
	default:
		// Kill every process of the container, not only its init, so that
		// none outlives the task in a shared PID namespace.
		if err := task.Kill(taskCtx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
			return podCgroup, fmt.Errorf("killing task: %w", err)
		}
		if _, err := task.Delete(taskCtx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return podCgroup, fmt.Errorf("deleting task: %w", err)
		}
	}
	delCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := c.Delete(delCtx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return podCgroup, err
	}
	return podCgroup, nil
}

// podCgroupOf is the pod cgroup a container's cgroupsPath is in: with the
// systemd driver's "slice:prefix:name", a pod slice; else a parent named
// pod<uid>. Empty if it is in none.
func podCgroupOf(cgroupsPath string) string {
	if slice, _, ok := strings.Cut(cgroupsPath, ":"); ok {
		if strings.Contains(slice, "-pod") {
			return slice
		}
		return ""
	}
	parent := filepath.Dir(cgroupsPath)
	if !strings.HasPrefix(filepath.Base(parent), "pod") {
		return ""
	}
	return parent
}

// removePodCgroup removes, once empty, a pod cgroup (podCgroupOf's) from
// every hierarchy: runc removes only a container's own, and a test that
// leaves its pods running when it ends would leave the staticlet pod
// cgroups behind. A pod cgroup still in use stays (rmdir fails on it). A
// pod slice of the systemd driver is stopped.
func removePodCgroup(ctx context.Context, podCgroup string) {
	if strings.HasSuffix(podCgroup, ".slice") {
		// The systemd driver's: the slice is a unit systemd removes.
		stopCtx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_ = exec.CommandContext(stopCtx, "systemctl", "stop", podCgroup).Run()
		return
	}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", podCgroup))
	for _, dir := range append(dirs, filepath.Join("/sys/fs/cgroup", podCgroup)) {
		_ = os.Remove(dir)
	}
}

// exitedEarly reports whether the daemon has already exited.
func (e *Env) exitedEarly() bool {
	select {
	case <-e.exited:
		return true
	default:
		return false
	}
}

// stopDaemon sends SIGTERM and waits, then SIGKILL when termTimeout passes or
// ctx is done.
func (e *Env) stopDaemon(ctx context.Context) error {
	if e.cmd == nil || e.cmd.Process == nil {
		return nil
	}
	if e.exitedEarly() {
		return nil
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling containerd: %w", err)
	}
	timer := time.NewTimer(termTimeout)
	defer timer.Stop()
	select {
	case <-e.exited:
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	if err := e.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing containerd: %w", err)
	}
	<-e.exited // SIGKILL cannot be ignored; the wait is short
	return fmt.Errorf("containerd ignored SIGTERM for %v; killed it", termTimeout)
}

// runcRoot is where the runc shim (containerd 1.6 to 2.x) keeps runc's state,
// one directory per namespace, for every containerd on the host.
const runcRoot = "/run/containerd/runc"

// deleteRuncLeftovers runs `runc delete --force` for every container in
// runcRoot whose rootfs is under dir: containers of this daemon that no shim
// deleted because containerd or the shim died first. It kills their processes
// and removes their cgroups and runc state, which would otherwise outlive the
// test and collide with a later container of the same namespace and ID.
func deleteRuncLeftovers(ctx context.Context, dir string) error {
	states, err := filepath.Glob(filepath.Join(runcRoot, "*", "*", "state.json"))
	if err != nil {
		return fmt.Errorf("listing runc state: %w", err)
	}
	var errs []error
	for _, state := range states {
		b, err := os.ReadFile(state)
		if err != nil {
			continue // deleted meanwhile
		}
		var st struct {
			Config struct {
				Rootfs string `json:"rootfs"`
			} `json:"config"`
		}
		if err := json.Unmarshal(b, &st); err != nil || !strings.HasPrefix(st.Config.Rootfs, dir+"/") {
			continue
		}
		id := filepath.Base(filepath.Dir(state))
		root := filepath.Dir(filepath.Dir(state))
		runCtx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := exec.CommandContext(runCtx, "runc", "--root", root, "delete", "--force", id).CombinedOutput()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("runc delete --force %s in %s: %w: %s", id, root, err, bytes.TrimSpace(out)))
		}
	}
	return errors.Join(errs...)
}

// killShims kills shims still running for the daemon at address, found by the
// "-address <address>" in their command line, and the processes they parent
// (container inits, which a shim reaps as subreaper), children first. It also
// removes the sockets the killed shims leave in /run/containerd/s. It returns
// the PIDs it killed.
func killShims(address string) ([]int, error) {
	procs, err := procfs.List()
	if err != nil {
		return nil, err
	}
	var (
		killed []int
		errs   []error
	)
	for _, shim := range procs {
		if !isShimFor(shim.Args, address) {
			continue
		}
		// Stopped, the shim forks no more: the children listed next are
		// all it has, a child it is forking (still named like the shim
		// until it execs) included.
		if err := syscall.Kill(shim.PID, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("stopping leftover shim %d: %w", shim.PID, err))
		}
		now, err := procfs.List()
		if err != nil {
			errs = append(errs, err)
			now = procs
		}
		var pids []int
		for _, p := range now {
			if p.PPID == shim.PID {
				pids = append(pids, p.PID)
			}
		}
		pids = append(pids, shim.PID)
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("killing leftover process %d of shim %d: %w", pid, shim.PID, err))
				continue
			}
			killed = append(killed, pid)
		}
		removeShimSocket(address, shim.Args)
	}
	// Once each is a zombie or gone, the shims' unreaped children have been
	// reparented, to this process if it is their subreaper, and the caller
	// can reap them all: a child killed a moment after its shim is not a
	// zombie yet when the shim is.
	for _, pid := range killed {
		errs = append(errs, waitGone(pid, 5*time.Second))
	}
	return killed, errors.Join(errs...)
}

// reapZombies reaps this process's zombie children that match: shims of any
// Env in this process and processes killShims killed, which it inherited as
// child subreaper. Only zombies are waited for, and this process starts none
// of them itself, so this cannot steal an exit status an exec.Cmd waits for.
func reapZombies(match func(procfs.Proc) bool) error {
	procs, err := procfs.List()
	if err != nil {
		return err
	}
	self := os.Getpid()
	var errs []error
	for _, p := range procs {
		if p.PPID != self || p.State != 'Z' || !match(p) {
			continue
		}
		errs = append(errs, reap(p, 5*time.Second))
	}
	return errors.Join(errs...)
}

// reap waits for zombie child p. The stat line of a multithreaded process
// (a shim) shows it a zombie as soon as its main thread has exited, while
// its other threads may still be exiting; until they have, it cannot be
// waited for, and a wait that does not block finds nothing. So it is
// waited for until it is reaped, within timeout.
func reap(p procfs.Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(p.PID, &ws, unix.WNOHANG, nil)
		switch {
		case pid == p.PID, errors.Is(err, unix.ECHILD):
			return nil
		case err != nil && !errors.Is(err, unix.EINTR):
			return fmt.Errorf("reaping process %d (%s): %w", p.PID, p.Comm, err)
		case time.Now().After(deadline):
			return fmt.Errorf("process %d (%s) still not reaped %v after it was a zombie", p.PID, p.Comm, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isShimFor reports whether args are those of a containerd shim serving the
// daemon at address.
func isShimFor(args []string, address string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	return procfs.ArgValue(args, "address") == address
}

// removeShimSocket removes the socket a killed shim leaves behind. containerd
// 1.6 to 2.x name it /run/containerd/s/<sha256 of address/namespace/id>; if
// that ever changes, this removes nothing, which is harmless.
func removeShimSocket(address string, args []string) {
	ns, id := procfs.ArgValue(args, "namespace"), procfs.ArgValue(args, "id")
	if ns == "" || id == "" {
		return
	}
	sum := sha256.Sum256([]byte(filepath.Join(address, ns, id)))
	os.Remove(filepath.Join("/run/containerd/s", fmt.Sprintf("%x", sum)))
}

// waitGone waits until pid no longer exists or is a zombie.
func waitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		// The stat line only: an exiting process's command line is gone
		// before it is a zombie, and reading it would take it for gone
		// too early, before it can be reaped.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		if p, err := procfs.ParseStat(string(b)); err == nil && (p.State == 'Z' || p.State == 'X') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still running %v after SIGKILL", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shimPIDs lists the shims serving the daemon at address, while their
// command lines, which name it, can still be read.
func shimPIDs(address string) []int {
	procs, _ := procfs.List()
	var out []int
	for _, p := range procs {
		if isShimFor(p.Args, address) {
			out = append(out, p.PID)
		}
	}
	return out
}

// UnmountUnder lazily unmounts every mount point under dir, deepest first.
// Tests use it for what they leave under their own directories, such as
// the namespaces a killed staticlet had pinned.
func UnmountUnder(dir string) error {
	points, err := mountPointsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountPointsUnder returns the mount points strictly under dir from
// /proc/self/mountinfo, deepest first.
func mountPointsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// Fields: ID, parent ID, major:minor, root, mount point, ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	slices.SortFunc(points, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(points), nil
}

// unescapeMountPath undoes the kernel's octal escaping (\040 for a space, and
// likewise tab, newline and backslash) of mountinfo paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
