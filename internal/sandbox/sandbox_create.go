package sandbox

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// CreateSandbox creates and starts p's pause sandbox, which holds the pod's
// namespaces. It needs no image: the pause program runs from a read-only
// root under the root dir. On failure nothing of it is left.
func (r *Runtime) CreateSandbox(ctx context.Context, p *pod.Pod) (_ pod.Record, err error) {
	uid := string(p.UID)
	if err := os.MkdirAll(r.PodDir(uid), 0o750); err != nil {
		return pod.Record{}, fmt.Errorf("creating the directory of pod %s: %w", p, err)
	}
	id := newID()
	s := spec.Sandbox(p, spec.SandboxOptions{
		Rootfs:      pauseRoot(r.cfg.RootDir),
		Args:        append([]string{pauseProgram}, r.cfg.PauseArgs...),
		CgroupsPath: cgroupsPath(r.cfg.Namespace, id),
	})
	s.Annotations = map[string]string{shimGroup: id}
	labels := podLabels(p, pod.KindSandbox)
	labels[LabelHash] = p.SandboxHash

	cctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.NewContainer(cctx, id,
		client.WithRuntime(runcRuntime, nil),
		client.WithSpec(s),
		client.WithContainerLabels(labels))
	if err != nil {
		return pod.Record{}, fmt.Errorf("creating the sandbox of pod %s: %w", p, err)
	}
	defer func() {
		if err != nil {
			r.undoContainer(ctx, c)
		}
	}()
	t, err := c.NewTask(cctx, cio.NullIO)
	if err != nil {
		return pod.Record{}, fmt.Errorf("creating the sandbox task of pod %s: %w", p, err)
	}
	if err := t.Start(cctx); err != nil {
		return pod.Record{}, fmt.Errorf("starting the sandbox of pod %s: %w", p, err)
	}
	rec := recordFromLabels(id, labels, time.Now())
	rec.State = pod.TaskRunning
	rec.Pid = t.Pid()
	return rec, nil
}

// cgroupsPath places a container's cgroup under the staticlet namespace's.
func cgroupsPath(namespace, id string) string { return "/" + namespace + "/" + id }

// undoContainer removes a container whose creation failed part way, with a
// context that survives the caller's cancellation.
func (r *Runtime) undoContainer(ctx context.Context, c client.Container) {
	ctx, cancel := r.call(context.WithoutCancel(ctx))
	defer cancel()
	if t, err := c.Task(ctx, nil); err == nil {
		_, _ = t.Delete(ctx, client.WithProcessKill)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		r.cfg.Logger.Warn("cleaning up a container that failed to start", "container", c.ID(), "err", err)
	}
}
