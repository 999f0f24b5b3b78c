package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// StartContainer creates and starts one container of a pod in its running
// sandbox. Errors that leave the container waiting carry a kubelet reason
// (pod.WaitingError). On failure nothing of the container is left.
func (r *Runtime) StartContainer(ctx context.Context, req pod.ContainerRequest) (_ pod.Record, err error) {
	p, c := req.Pod, req.Container
	clock := newPhaseClock()
	img, err := r.images.Resolve(ctx, c.Image, c.ImagePullPolicy)
	if err != nil {
		return pod.Record{}, err
	}
	clock.mark("image")
	volumes, err := r.prepareVolumes(p, req.Sandbox.PodUID)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: err}
	}
	sysctls, err := spec.Sysctls(p, r.unsafeSysctlAllowed)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "SysctlForbidden", Err: err}
	}
	seccompJSON, err := r.localhostSeccomp(p, c)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: err}
	}
	// The container's cgroup is in its sandbox's pod cgroup, whose limits
	// follow the pod's containers as they are now. Lowering them can fail
	// (below what the pod uses, or what a running container is allowed),
	// which need not stop this container.
	podCgroup, err := r.ensurePodCgroup(ctx, p, req.Sandbox.PodUID)
	if err != nil {
		r.cfg.Logger.Warn("updating the limits of a pod's cgroup", "pod", p.String(), "err", err)
	}
	id := newID()
	termFile, err := r.prepareTermination(req.Sandbox.PodUID, c, id)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: err}
	}
	defer func() {
		if err != nil {
			_ = r.removeTerminationFile(termFile)
		}
	}()
	s, err := spec.Container(p, c, spec.ContainerOptions{
		HostCaps:         r.host.caps,
		Namespaces:       r.pinnedPaths(req.Sandbox.ID, p),
		SandboxPID:       req.Sandbox.Pid,
		Image:            img.Config,
		CgroupsPath:      r.cgroups.ContainerCgroup(podCgroup, id),
		Resources:        r.cgroups.Resources(),
		Volumes:          volumes,
		EtcFiles:         r.etcFiles(req.Sandbox.PodUID),
		TerminationFile:  termFile,
		Sysctls:          sysctls,
		LocalhostSeccomp: seccompJSON,
		Node:             r.nodeFor(req.Sandbox),
	})
	if err == nil {
		err = prepareMounts(c, s)
	}
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: err}
	}
	group, err := r.sandboxShimGroup(ctx, req.Sandbox.ID)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerError",
			Err: fmt.Errorf("creating container %q of pod %s: %w", c.Name, p, err)}
	}
	s.Annotations = map[string]string{shimGroup: group}
	labels := podLabels(p, req.Kind)
	labels[LabelContainer] = c.Name
	labels[LabelHash] = pod.ContainerHash(c)
	labels[LabelAttempt] = strconv.Itoa(req.Attempt)
	labels[LabelSandboxID] = req.Sandbox.ID
	labels[LabelImageRef] = c.Image
	labels[LabelImageID] = img.ID
	labels[LabelStopSignal] = r.stopSignalOf(c, img)

	logDir := filepath.Join(r.PodLogDir(p.Namespace, p.Name, req.Sandbox.PodUID), c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return pod.Record{}, fmt.Errorf("creating the log directory of container %q: %w", c.Name, err)
	}
	logPath := filepath.Join(logDir, strconv.Itoa(req.Attempt)+".log")
	terminationLabels(labels, c, termFile, logPath)

	// The lease holds the snapshot until the container refers to it.
	lctx, release, err := r.leases.With(ctx, "container")
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerError",
			Err: fmt.Errorf("creating container %q of pod %s: %w", c.Name, p, err)}
	}
	defer release()
	cctx, cancel := r.call(lctx)
	defer cancel()
	unlockDevices, err := r.applyDevices(cctx, req, s, labels)
	if err != nil {
		return pod.Record{}, err
	}
	clock.mark("spec")
	var rootfs []mount.Mount
	ctr, err := r.client.NewContainer(cctx, id,
		client.WithImage(img.Image),
		client.WithSnapshotter(r.cfg.Snapshotter),
		r.withNewSnapshot(id, img.Image, &rootfs),
		client.WithRuntime(runcRuntime, r.cgroups.RuntimeOptions()),
		client.WithSpec(s),
		client.WithContainerLabels(labels))
	// Its label holds its devices from here on.
	unlockDevices()
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerError",
			Err: fmt.Errorf("creating container %q of pod %s: %w", c.Name, p, err)}
	}
	defer func() {
		if err != nil {
			r.undoContainer(ctx, ctr)
		}
	}()
	clock.mark("container")
	rec := recordFromLabels(id, labels, time.Now())
	t, err := r.createTask(cctx, id, rootfs, r.containerOutput(rec))
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "RunContainerError",
			Err: fmt.Errorf("creating the task of container %q of pod %s: %w", c.Name, p, err)}
	}
	clock.mark("task")
	if runsOnce(req) {
		if _, err := ctr.SetLabels(cctx, map[string]string{LabelStarting: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
			return pod.Record{}, &pod.WaitingError{Reason: "RunContainerError",
				Err: fmt.Errorf("starting container %q of pod %s: %w", c.Name, p, err)}
		}
	}
	startAt := time.Now()
	pid, err := t.start(cctx)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "RunContainerError",
			Err: fmt.Errorf("starting container %q of pod %s: %w", c.Name, p, err)}
	}
	clock.mark("start")
	r.cfg.Logger.Debug("started a container", clock.attrs("pod", p.String(), "container", c.Name, "id", id)...)
	rec.State = pod.TaskRunning
	rec.Pid = pid
	rec.StartedAt = r.started(cctx, ctr, startAt)
	return rec, nil
}

// localhostSeccomp reads the Localhost seccomp profile c uses, from the
// root dir's seccomp directory as the kubelet does; nil when c uses none.
func (r *Runtime) localhostSeccomp(p *pod.Pod, c *v1.Container) ([]byte, error) {
	prof := spec.SeccompProfileOf(p, c)
	if prof == nil || prof.Type != v1.SeccompProfileTypeLocalhost || prof.LocalhostProfile == nil {
		return nil, nil
	}
	dir := filepath.Join(r.cfg.RootDir, "seccomp")
	path := filepath.Join(dir, *prof.LocalhostProfile)
	if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
		return nil, fmt.Errorf("seccomp profile %q is outside %s", *prof.LocalhostProfile, dir)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading seccomp profile: %w", err)
	}
	return b, nil
}

// unsafeSysctlAllowed tells whether --allowed-unsafe-sysctls lets pods set
// name; a pattern ending in * matches a prefix.
func (r *Runtime) unsafeSysctlAllowed(name string) bool {
	for _, pat := range r.cfg.Node.AllowedUnsafeSysctls {
		if prefix, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(name, prefix) || pat == name {
			return true
		}
	}
	return false
}

// nodeFor is what the environment of a container of sandbox sb may
// refer to: the node's facts and the pod's addresses.
func (r *Runtime) nodeFor(sb pod.Record) spec.NodeFacts {
	n := r.node
	n.PodIPs = sb.IPs
	return n
}

// runsOnce tells whether the container req starts runs at most once: its
// pod's restartPolicy is Never (a sidecar restarts whatever the pod's
// policy). Such a container is labelled LabelStarting before its task
// starts, so that one whose task containerd loses is not started again.
func runsOnce(req pod.ContainerRequest) bool {
	if req.Pod.Spec.RestartPolicy != v1.RestartPolicyNever {
		return false
	}
	return req.Container.RestartPolicy == nil || *req.Container.RestartPolicy != v1.ContainerRestartPolicyAlways
}

// started records in container c's labels (LabelStartedAt, which
// recordFromLabels reads) that its task was started at at, and returns
// at: a running container's start, not its record's creation, which is
// earlier by the task's creation, a turn in a shared shim (a second or
// more with many pods starting); probes count their initial delay from
// it, as the kubelet's do. at is taken before
// the start is asked for, so that an exit, however quick, comes after it
// (recordFromLabels takes an exit from before a start for an earlier
// process's).
func (r *Runtime) started(ctx context.Context, c client.Container, at time.Time) time.Time {
	if _, err := c.SetLabels(ctx, map[string]string{LabelStartedAt: at.UTC().Format(time.RFC3339Nano)}); err != nil {
		r.cfg.Logger.Warn("recording when a container started", "container", c.ID(), "err", err)
	}
	return at
}
