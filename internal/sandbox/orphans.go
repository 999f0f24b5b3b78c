package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/sandbox/procfs"
)

// Orphans: what staticlet made that no record leads to any more.
//
// A shim is started by containerd when a task is created, before
// containerd has recorded the task. A containerd killed in between comes
// back without the task, and the shim, with whatever it was told to run,
// serves no one: nothing would ever stop it. SweepShims finds such shims
// in the process table (their command line names this containerd and
// staticlet's namespace) and stops them with what they run.
//
// A pod's files (its directory under the root dir, its logs, its cgroups)
// are removed when its last container is; a pod whose containers vanished
// without staticlet removing them (a containerd that lost them, a staticlet
// killed between making a pod's directory and its sandbox) leaves them.
// SweepPodFiles removes those of pods that have no container and are not
// wanted.

// runcStateRoot is where the runc shim keeps runc's state, one directory
// per namespace, as containerd 1.6 to 2.x set it by default.
const runcStateRoot = "/run/containerd/runc"

// shimSocketDir holds the sockets of containerd's shims (1.6 to 2.x).
const shimSocketDir = "/run/containerd/s"

// shimSweeper remembers the shims one sweep found serving no task, so that
// the next can stop those that still serve none: a shim is started before
// its task exists, and one found in that moment is not an orphan.
type shimSweeper struct {
	mu       sync.Mutex
	suspects map[shimKey]time.Time // guarded by mu; when first found
}

// shimKey names a process across PID reuse.
type shimKey struct {
	pid   int
	start uint64 // its start time, in clock ticks after boot
}

// orphanShimAge is how long a shim must have served no task before
// SweepShims stops it: longer than any task creation takes, which is
// bounded by the call timeout.
func (r *Runtime) orphanShimAge() time.Duration { return r.cfg.CallTimeout }

// SweepShims stops the shims of staticlet's namespace on this containerd
// that have served no task containerd knows for orphanShimAge, with the
// processes they run, their containers' root mounts and runc state, and
// their sockets. It returns how many it stopped.
func (r *Runtime) SweepShims(ctx context.Context) (int, error) {
	procs, err := procfs.List()
	if err != nil {
		return 0, err
	}
	cctx, cancel := r.call(ctx)
	resp, err := r.client.TaskService().List(cctx, &tasks.ListTasksRequest{})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("listing tasks: %w", err)
	}
	known := map[uint32]bool{}
	ids := map[string]bool{}
	for _, t := range resp.Tasks {
		known[t.Pid] = true
		ids[t.ID] = true
	}
	children := map[int][]procfs.Proc{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p)
	}
	now := time.Now()
	r.shims.mu.Lock()
	defer r.shims.mu.Unlock()
	if r.shims.suspects == nil {
		r.shims.suspects = map[shimKey]time.Time{}
	}
	seen := map[shimKey]bool{}
	stopped := 0
	var errs []error
	for _, shim := range procs {
		if !r.isOwnShim(shim.Args) {
			continue
		}
		serves := ids[procfs.ArgValue(shim.Args, "id")]
		for _, c := range children[shim.PID] {
			serves = serves || known[uint32(c.PID)]
		}
		if serves {
			continue
		}
		key := shimKey{shim.PID, shim.Start}
		seen[key] = true
		first, ok := r.shims.suspects[key]
		if !ok {
			r.shims.suspects[key] = now
			continue
		}
		if now.Sub(first) < r.orphanShimAge() {
			continue
		}
		r.cfg.Logger.Warn("stopping a shim that serves no task containerd knows", "pid", shim.PID, "shim", procfs.ArgValue(shim.Args, "id"))
		if err := r.stopOrphanShim(shim, children[shim.PID]); err != nil {
			errs = append(errs, err)
			continue
		}
		stopped++
	}
	for key := range r.shims.suspects {
		if !seen[key] {
			delete(r.shims.suspects, key)
		}
	}
	return stopped, errors.Join(errs...)
}

// isOwnShim tells whether args are those of a shim that serves staticlet's
// namespace on this containerd.
func (r *Runtime) isOwnShim(args []string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	return procfs.ArgValue(args, "namespace") == r.cfg.Namespace &&
		strings.TrimPrefix(procfs.ArgValue(args, "address"), "unix://") == r.cfg.Address
}

// stopOrphanShim kills an orphaned shim and the container processes it
// runs, then removes what they leave: their root mounts, runc's state of
// them, and the shim's socket.
func (r *Runtime) stopOrphanShim(shim procfs.Proc, children []procfs.Proc) error {
	// The shim's working directory is the bundle of the task that started
	// it, gone with that task when the shim is shared (shimGroupOf).
	var bundles []string
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", shim.PID)); err == nil && !strings.HasSuffix(cwd, " (deleted)") {
		bundles = append(bundles, cwd)
	}
	// Each container's root is <bundle>/rootfs, its bundle named after it.
	for _, c := range children {
		if root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", c.PID)); err == nil && filepath.Base(root) == "rootfs" {
			bundles = append(bundles, filepath.Dir(root))
		}
	}
	containers := map[string]string{}
	for _, b := range bundles {
		containers[filepath.Base(b)] = b
	}
	socket := shimSocket(bundles, r.cfg.Address, r.cfg.Namespace, procfs.ArgValue(shim.Args, "id"))
	var errs []error
	// Stopped, the shim starts nothing more; its children are then killed,
	// each the init of its container's PID namespace, and so with all
	// its container runs.
	procs := append(slices.Clone(children), shim)
	for _, p := range procs {
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("killing process %d of an orphaned shim: %w", p.PID, err))
		}
	}
	for _, p := range procs {
		waitExited(p, 5*time.Second)
	}
	for id, b := range containers {
		root := filepath.Join(b, "rootfs")
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", root, err))
		}
		if err := os.RemoveAll(filepath.Join(runcStateRoot, r.cfg.Namespace, id)); err != nil {
			errs = append(errs, err)
		}
	}
	if socket != "" {
		if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// shimSocket is the path of the socket of the shim that serves the tasks
// of bundles: from a bundle's address file, which containerd writes once
// the shim answers, else as the runc shim names it, after its group (a
// bundle's spec annotation: a sandbox's ID, or a group shared by pods) or,
// with no bundle to tell, after id, the task that started it.
func shimSocket(bundles []string, address, namespace, id string) string {
	for _, bundle := range bundles {
		if b, err := os.ReadFile(filepath.Join(bundle, "address")); err == nil {
			if path, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "unix://"); ok {
				return path
			}
		}
	}
	for _, bundle := range bundles {
		var s struct {
			Annotations map[string]string `json:"annotations"`
		}
		if b, err := os.ReadFile(filepath.Join(bundle, "config.json")); err == nil && json.Unmarshal(b, &s) == nil && s.Annotations[shimGroup] != "" {
			id = s.Annotations[shimGroup]
			break
		}
	}
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Join(address, namespace, id)))
	return filepath.Join(shimSocketDir, hex.EncodeToString(sum[:]))
}

// waitExited waits, up to timeout, until process p is gone or a zombie.
func waitExited(p procfs.Proc, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		now, err := procfs.Read(p.PID)
		if err != nil || now.State == 'Z' || now.Start != p.Start {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SweepOrphans runs SweepShims and SweepPodFiles, and tells what they did.
func (r *Runtime) SweepOrphans(ctx context.Context, keep func(uid string) bool) error {
	shims, serr := r.SweepShims(ctx)
	pods, perr := r.SweepPodFiles(ctx, keep)
	if shims > 0 || len(pods) > 0 {
		r.cfg.Logger.Info("swept what no container leads to", "shims stopped", shims, "pods' files removed", len(pods))
	}
	return errors.Join(serr, perr)
}

// SweepPodFiles removes the files (logs, cgroups, state directory) of
// pods that have no container and that keep does not want: left when their
// containers went without staticlet removing them. It returns the UIDs
// whose files it removed. A pod's state directory under the root dir is
// what marks its files as staticlet's (the logs directory may be shared
// with a kubelet's pods); RemovePodFiles removes it last.
func (r *Runtime) SweepPodFiles(ctx context.Context, keep func(uid string) bool) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(r.cfg.RootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(ents) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing pod directories: %w", err)
	}
	// Containers' labels say which pods have some: no task, so no shim,
	// is asked.
	cs, err := r.listContainers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	logs, err := os.ReadDir(r.cfg.Logs.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing pod log directories: %w", err)
	}
	has, ids := map[string]bool{}, map[string]bool{}
	for _, c := range cs {
		has[c.Labels[LabelPodUID]] = true
		ids[c.ID] = true
	}
	r.messages.retain(ids)
	r.sandboxGroups.retain(ids)
	var removed []string
	var errs []error
	for _, e := range ents {
		uid := e.Name()
		if has[uid] || keep(uid) {
			continue
		}
		namespace, name := podLogNames(logs, uid)
		r.cfg.Logger.Info("removing the files of a pod with no container and no manifest", "uid", uid, "pod", namespace+"/"+name)
		if err := r.RemovePodFiles(ctx, namespace, name, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}

// podLogNames returns the namespace and name of the pod with uid from its
// log directory among logs, <namespace>_<name>_<uid> (neither holds '_'),
// or nothing when it has none.
func podLogNames(logs []os.DirEntry, uid string) (namespace, name string) {
	for _, e := range logs {
		if parts := strings.SplitN(e.Name(), "_", 3); len(parts) == 3 && parts[2] == uid {
			return parts[0], parts[1]
		}
	}
	return "", ""
}
