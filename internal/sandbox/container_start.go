package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// StartContainer creates and starts one container of a pod in its running
// sandbox. Errors that leave the container waiting carry a kubelet reason
// (pod.WaitingError). On failure nothing of the container is left.
func (r *Runtime) StartContainer(ctx context.Context, req pod.ContainerRequest) (_ pod.Record, err error) {
	p, c := req.Pod, req.Container
	img, err := r.resolveImage(ctx, c.Image, c.ImagePullPolicy)
	if err != nil {
		return pod.Record{}, err
	}
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
	podCgroup, err := r.ensurePodCgroup(p, req.Sandbox.PodUID)
	if err != nil {
		r.cfg.Logger.Warn("updating the limits of a pod's cgroup", "pod", p.String(), "err", err)
	}
	id := newID()
	s, err := spec.Container(p, c, spec.ContainerOptions{
		HostCaps:         r.caps,
		Namespaces:       r.pinnedPaths(req.Sandbox.ID, p),
		SandboxPID:       req.Sandbox.Pid,
		Image:            img.config,
		CgroupsPath:      path.Join(podCgroup, id),
		Resources:        r.resources,
		Volumes:          volumes,
		EtcFiles:         r.etcFiles(req.Sandbox.PodUID),
		Sysctls:          sysctls,
		LocalhostSeccomp: seccompJSON,
		Node:             r.node,
	})
	if err == nil {
		err = prepareSubPaths(c, s)
	}
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: err}
	}
	s.Annotations = map[string]string{shimGroup: req.Sandbox.ID}
	labels := podLabels(p, req.Kind)
	labels[LabelContainer] = c.Name
	labels[LabelHash] = pod.ContainerHash(c)
	labels[LabelAttempt] = strconv.Itoa(req.Attempt)
	labels[LabelSandboxID] = req.Sandbox.ID
	labels[LabelImageRef] = c.Image
	labels[LabelImageID] = img.id

	logDir := filepath.Join(r.PodLogDir(p.Namespace, p.Name, req.Sandbox.PodUID), c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return pod.Record{}, fmt.Errorf("creating the log directory of container %q: %w", c.Name, err)
	}
	logPath := filepath.Join(logDir, strconv.Itoa(req.Attempt)+".log")

	cctx, cancel := r.call(ctx)
	defer cancel()
	ctr, err := r.client.NewContainer(cctx, id,
		client.WithImage(img.image),
		client.WithSnapshotter(r.cfg.Snapshotter),
		client.WithNewSnapshot(id, img.image),
		client.WithRuntime(runcRuntime, nil),
		client.WithSpec(s),
		client.WithContainerLabels(labels))
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "CreateContainerError",
			Err: fmt.Errorf("creating container %q of pod %s: %w", c.Name, p, err)}
	}
	defer func() {
		if err != nil {
			r.undoContainer(ctx, ctr)
		}
	}()
	output := cio.LogFile(logPath)
	if r.cfg.LogDriverArgs != nil {
		// The shim runs the driver with the container's pipes: output is
		// written while staticlet is away, and never waits on it.
		output = cio.BinaryIO(r.cfg.LogDriver, r.cfg.LogDriverArgs(logPath))
	}
	t, err := ctr.NewTask(cctx, output)
	if err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "RunContainerError",
			Err: fmt.Errorf("creating the task of container %q of pod %s: %w", c.Name, p, err)}
	}
	if err := t.Start(cctx); err != nil {
		return pod.Record{}, &pod.WaitingError{Reason: "RunContainerError",
			Err: fmt.Errorf("starting container %q of pod %s: %w", c.Name, p, err)}
	}
	rec := recordFromLabels(id, labels, time.Now())
	rec.State = pod.TaskRunning
	rec.Pid = t.Pid()
	return rec, nil
}

// prepareVolumes resolves each volume of p to a path on the host, creating
// what the volume's type says to create. Pod state lives under the
// sandbox's UID, the directory created with the sandbox.
func (r *Runtime) prepareVolumes(p *pod.Pod, sandboxUID string) (map[string]string, error) {
	out := make(map[string]string, len(p.Spec.Volumes))
	for _, v := range p.Spec.Volumes {
		switch {
		case v.HostPath != nil:
			if err := prepareHostPath(v.HostPath); err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			out[v.Name] = v.HostPath.Path
		case v.EmptyDir != nil:
			dir := filepath.Join(r.PodDir(sandboxUID), "volumes", "empty-dir", v.Name)
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			// World-writable like the kubelet's, so any user in the pod can use it.
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			// The pod's fsGroup owns it, and what is made in it (setgid).
			if g := spec.FSGroup(p); g != nil {
				if err := os.Chown(dir, -1, int(*g)); err != nil {
					return nil, fmt.Errorf("volume %q: %w", v.Name, err)
				}
				if err := os.Chmod(dir, 0o777|os.ModeSetgid); err != nil {
					return nil, fmt.Errorf("volume %q: %w", v.Name, err)
				}
			}
			out[v.Name] = dir
		}
	}
	return out, nil
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
	for _, pat := range r.cfg.AllowedUnsafeSysctls {
		if prefix, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(name, prefix) || pat == name {
			return true
		}
	}
	return false
}

// prepareSubPaths creates the subdirectories c's subPath mounts bind, as
// the kubelet does, when they are missing.
func prepareSubPaths(c *v1.Container, s *specs.Spec) error {
	for _, vm := range c.VolumeMounts {
		if vm.SubPath == "" && vm.SubPathExpr == "" {
			continue
		}
		for _, m := range s.Mounts {
			if m.Destination != vm.MountPath {
				continue
			}
			if _, err := os.Lstat(m.Source); errors.Is(err, fs.ErrNotExist) {
				if err := os.MkdirAll(m.Source, 0o755); err != nil {
					return fmt.Errorf("volume mount %s: %w", vm.MountPath, err)
				}
			}
		}
	}
	return nil
}

// prepareHostPath checks or creates a hostPath volume's path as its type asks.
func prepareHostPath(hp *v1.HostPathVolumeSource) error {
	typ := v1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	fi, statErr := os.Stat(hp.Path)
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if statErr != nil {
			return os.MkdirAll(hp.Path, 0o755)
		}
		if !fi.IsDir() {
			return fmt.Errorf("hostPath %s exists and is not a directory", hp.Path)
		}
	case v1.HostPathFileOrCreate:
		if statErr != nil {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if fi.IsDir() {
			return fmt.Errorf("hostPath %s exists and is a directory", hp.Path)
		}
	case v1.HostPathDirectory:
		if statErr != nil || !fi.IsDir() {
			return fmt.Errorf("hostPath %s is not a directory", hp.Path)
		}
	case v1.HostPathFile:
		if statErr != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath %s is not a file", hp.Path)
		}
	case v1.HostPathSocket:
		if statErr != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("hostPath %s is not a socket", hp.Path)
		}
	case v1.HostPathCharDev:
		if statErr != nil || fi.Mode()&os.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath %s is not a character device", hp.Path)
		}
	case v1.HostPathBlockDev:
		if statErr != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath %s is not a block device", hp.Path)
		}
	}
	return nil
}
