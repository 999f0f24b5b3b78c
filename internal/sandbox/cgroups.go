package sandbox

import (
	"context"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// podCgroups is what sandbox asks of the pods' cgroups (package cgroups,
// whose Manager has the details): a pod's cgroup made before its
// containers start and removed once it is gone, the names runc is given,
// and what the cgroups tell of exits (OOM kills) and usage.
type podCgroups interface {
	// Mode names the node's cgroup mode.
	Mode() string
	// Resources are what a spec may ask for.
	Resources() spec.ResourceFacts
	// EnsurePod makes the cgroup of p, whose sandbox has uid, with its
	// limits, and returns its path (also with an error).
	EnsurePod(ctx context.Context, p *pod.Pod, uid string) (string, error)
	// RemovePod removes the cgroups of the pod with uid.
	RemovePod(ctx context.Context, uid string) error
	// ContainerCgroup is the cgroupsPath of container id in podCgroup.
	ContainerCgroup(podCgroup, id string) string
	// RuntimeOptions are the runc shim's options the driver needs.
	RuntimeOptions() any
	// OOMKills counts the OOM kills of the cgroup at a spec's cgroupsPath.
	OOMKills(cgroupsPath string) (int, error)
	// ExitOOM tells whether an exited container was OOM-killed, and
	// ClaimOOM accounts for a kill containerd reported.
	ExitOOM(cgroupsPath string) (bool, error)
	ClaimOOM(cgroupsPath string)
	// CPUUsage and WorkingSet read a cgroup's usage.
	CPUUsage(rel string) (uint64, bool, error)
	WorkingSet(rel string) (uint64, bool, error)
	// NodeWorkingSet reads the whole node's memory working set.
	NodeWorkingSet() (uint64, error)
	// Close ends what the driver holds open.
	Close()
}

// CgroupMode names the cgroup mode of the node, as found at New.
func (r *Runtime) CgroupMode() string { return r.cgroups.Mode() }

// ensurePodCgroup makes the cgroup of p, whose sandbox has uid, with the
// pod's limits before a container of it starts (cgroups.Manager.EnsurePod),
// within the call timeout.
func (r *Runtime) ensurePodCgroup(ctx context.Context, p *pod.Pod, uid string) (string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.cgroups.EnsurePod(ctx, p, uid)
}

// removePodCgroups removes the cgroups of the pod with uid
// (cgroups.Manager.RemovePod), even when ctx has ended, within the call
// timeout.
func (r *Runtime) removePodCgroups(ctx context.Context, uid string) error {
	ctx, cancel := r.call(context.WithoutCancel(ctx))
	defer cancel()
	return r.cgroups.RemovePod(ctx, uid)
}
