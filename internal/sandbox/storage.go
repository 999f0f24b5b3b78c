package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"

	"github.com/staticlet/staticlet/internal/pod"
)

// LabelEvicted is on a container killed for using more local ephemeral
// storage than a limit allows: the kubelet's message, the reason of its
// exit being Evicted.
const LabelEvicted = labelPrefix + "exit.evicted"

// StorageUsage measures the local ephemeral storage of every pod that has
// a running init or app container, as the kubelet counts it: each such
// container's writable layer (the usage containerd's snapshotter reports
// for its snapshot, a walk of its upper directory) and its log files of
// this run, and the pod's emptyDir volumes on disk (a walk of each, not
// crossing into a tmpfs). Sizes are of the blocks used, as du counts them.
// A part that cannot be measured counts as 0. Only the pods whose UIDs
// are in uids are measured: a walk costs what the pod wrote.
func (r *Runtime) StorageUsage(ctx context.Context, uids map[string]bool) ([]pod.StorageUsage, error) {
	cs, err := r.runningContainers(ctx)
	if err != nil {
		return nil, err
	}
	byUID := map[string]*pod.StorageUsage{}
	var order []string
	for _, c := range cs {
		uid := c.Labels[LabelPodUID]
		if !uids[uid] {
			continue
		}
		u := byUID[uid]
		if u == nil {
			u = &pod.StorageUsage{UID: uid, Pod: pod.Key{Namespace: c.Labels[LabelPodNamespace], Name: c.Labels[LabelPodName]}}
			byUID[uid] = u
			order = append(order, uid)
		}
		u.Containers = append(u.Containers, pod.ContainerStorage{
			Name:        c.Labels[LabelContainer],
			ID:          c.ID,
			RootfsBytes: r.rootfsUsage(ctx, c),
			LogBytes:    r.logUsage(c),
		})
	}
	out := make([]pod.StorageUsage, 0, len(order))
	for _, uid := range order {
		u := byUID[uid]
		u.EmptyDirs = diskEmptyDirs(filepath.Join(r.PodDir(uid), emptyDirVolumes))
		out = append(out, *u)
	}
	return out, nil
}

// runningContainers lists the init and app containers whose task runs.
func (r *Runtime) runningContainers(ctx context.Context) ([]containers.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	cs, procs, err := r.listWithTasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("measuring the pods' storage: %w", err)
	}
	out := cs[:0]
	for _, c := range cs {
		kind := pod.ContainerKind(c.Labels[LabelKind])
		t := procs[c.ID]
		running := t != nil && (t.Status == task.Status_RUNNING || t.Status == task.Status_PAUSED)
		if running && (kind == pod.KindApp || kind == pod.KindInit) && c.Labels[LabelEvicted] == "" {
			out = append(out, c)
		}
	}
	return out, nil
}

// rootfsUsage is what container c wrote to its writable layer.
func (r *Runtime) rootfsUsage(ctx context.Context, c containers.Container) int64 {
	if c.Snapshotter == "" || c.SnapshotKey == "" {
		return 0
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	u, err := r.client.SnapshotService(c.Snapshotter).Usage(ctx, c.SnapshotKey)
	if err != nil {
		if !errdefs.IsNotFound(err) {
			r.cfg.Logger.Debug("measuring a container's writable layer", "container", c.ID, "err", err)
		}
		return 0
	}
	return u.Size
}

// logUsage is the size of container c's log files of this run: the
// current one and those rotated from it (<attempt>.log and
// <attempt>.log.<time>); logs of its earlier runs belong to those.
func (r *Runtime) logUsage(c containers.Container) int64 {
	dir := filepath.Join(r.PodLogDir(c.Labels[LabelPodNamespace], c.Labels[LabelPodName], c.Labels[LabelPodUID]), c.Labels[LabelContainer])
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	prefix := c.Labels[LabelAttempt] + ".log"
	if _, err := strconv.Atoi(c.Labels[LabelAttempt]); err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if name := e.Name(); name == prefix || strings.HasPrefix(name, prefix+".") {
			n += diskUsage(filepath.Join(dir, name))
		}
	}
	return n
}

// diskEmptyDirs measures each emptyDir volume under dir that lies on
// dir's own file system: one of medium Memory is a tmpfs mounted there,
// bounded by its size already.
func diskEmptyDirs(dir string) map[string]int64 {
	var root syscall.Stat_t
	if err := syscall.Stat(dir, &root); err != nil {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make(map[string]int64, len(entries))
	for _, e := range entries {
		var st syscall.Stat_t
		path := filepath.Join(dir, e.Name())
		if !e.IsDir() || syscall.Lstat(path, &st) != nil || st.Dev != root.Dev {
			continue
		}
		out[e.Name()] = diskUsage(path)
	}
	return out
}

// diskUsage is the space path takes, du's way: the blocks of each file
// under it, a file with several links once, not crossing into another
// file system. What cannot be read counts as nothing.
func diskUsage(path string) int64 {
	var root syscall.Stat_t
	if err := syscall.Lstat(path, &root); err != nil {
		return 0
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var n int64
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable: skip it
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			return nil
		}
		if uint64(st.Dev) != uint64(root.Dev) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			id := inode{uint64(st.Dev), st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		n += st.Blocks * 512
		return nil
	})
	return n
}

// Evict kills container id, with SIGKILL at once, for using more local
// ephemeral storage than a limit allows. Its exit is reported with reason
// Evicted and message, which its labels keep, and is always a failure
// (137), as the pod the kubelet evicts always fails: the container starts
// again under restartPolicy Always and OnFailure, not under Never.
func (r *Runtime) Evict(ctx context.Context, id, message string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err == nil {
		_, err = c.SetLabels(ctx, map[string]string{LabelEvicted: message})
	}
	var t client.Task
	if err == nil {
		t, err = r.loadTask(ctx, c)
	}
	if err == nil {
		err = t.Kill(ctx, syscall.SIGKILL, client.WithKillAll)
	}
	if errdefs.IsNotFound(err) {
		return nil // gone meanwhile
	}
	if err != nil {
		return fmt.Errorf("evicting container %s: %w", id, err)
	}
	return nil
}
