package sandbox

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// CreateSandbox creates p's namespaces, pinned under the root dir, connects
// its network namespace to the pod network (when there is one and p is not
// on the host's), writes its pod files, makes its cgroup, and creates its
// sandbox container. A pod whose containers share a PID namespace gets a
// pause process, not started: the pod's containers can be created at
// once, joining the namespaces by path, before StartSandbox starts it. It
// needs no image: the pause program runs from a read-only root under the
// root dir. Any other pod's sandbox has no pause process (needsPause) and
// is up once made. On failure nothing of it is left.
func (r *Runtime) CreateSandbox(ctx context.Context, p *pod.Pod) (_ pod.Record, err error) {
	uid := string(p.UID)
	clock := newPhaseClock()
	if err := os.MkdirAll(r.PodDir(uid), 0o750); err != nil {
		return pod.Record{}, fmt.Errorf("creating the directory of pod %s: %w", p, err)
	}
	id := newID()
	nsDir := r.sandboxDir(id)
	if err := netns.Create(netns.Spec{Dir: nsDir, Kinds: pinnedKinds(p), Hostname: spec.Hostname(p)}); err != nil {
		return pod.Record{}, fmt.Errorf("creating the namespaces of pod %s: %w", p, err)
	}
	defer func() {
		if err != nil {
			if rerr := netns.Remove(nsDir); rerr != nil {
				r.cfg.Logger.Warn("removing the namespaces of a sandbox that failed", "sandbox", id, "err", rerr)
			}
		}
	}()
	clock.mark("namespaces")
	// The network goes into the pinned namespace before any process, and
	// is torn down before the namespace is unpinned.
	addrs, err := r.network.SetUp(id, nsDir, p)
	if err != nil {
		return pod.Record{}, fmt.Errorf("setting up the network of pod %s: %w", p, err)
	}
	defer func() {
		if err != nil {
			if terr := r.network.TearDown(id); terr != nil {
				r.cfg.Logger.Warn("removing the network of a sandbox that failed", "sandbox", id, "err", terr)
			}
		}
	}()
	ips := ipStrings(addrs)
	podIP := ""
	if len(ips) > 0 {
		podIP = ips[0]
	}
	clock.mark("network")
	if err := r.writePodFiles(p, podIP); err != nil {
		return pod.Record{}, fmt.Errorf("writing the files of pod %s: %w", p, err)
	}
	clock.mark("files")
	podCgroup, err := r.ensurePodCgroup(ctx, p, uid)
	if err != nil {
		return pod.Record{}, fmt.Errorf("creating the cgroup of pod %s: %w", p, err)
	}
	clock.mark("cgroup")
	defer func() {
		if err != nil {
			// Best effort: a cgroup still in use by the pod stays.
			_ = r.removePodCgroups(ctx, uid)
		}
	}()
	s := spec.Sandbox(p, spec.SandboxOptions{
		Rootfs:      r.pause.Dir,
		Args:        r.pause.Args,
		Env:         r.pause.Env,
		CgroupsPath: r.cgroups.ContainerCgroup(podCgroup, id),
		Namespaces:  r.namespacePaths(id, p),
		Resources:   r.cgroups.Resources(),
	})
	labels := podLabels(p, pod.KindSandbox)
	labels[LabelHash] = p.SandboxHash
	labels[LabelPinned] = "true"
	if len(ips) > 0 {
		labels[LabelPodIPs] = joinIPs(ips)
	}
	if !needsPause(p) {
		maps.Copy(labels, r.noPauseLabels(p))
	}
	group, chosen, err := r.podShimGroup(ctx, p, id)
	if err != nil {
		return pod.Record{}, fmt.Errorf("creating the sandbox of pod %s: %w", p, err)
	}
	defer func() { chosen(err == nil) }()
	clock.mark("group")
	s.Annotations = map[string]string{shimGroup: group}
	if group != id {
		labels[LabelShimGroup] = group
	}

	// A sandbox holds no snapshot nor content, so its record is made
	// under no lease: one write to containerd's database, where the
	// client's NewContainer adds a lease's creation and deletion.
	cctx, cancel := r.call(ctx)
	defer cancel()
	ctr := containers.Container{ID: id}
	for _, o := range []client.NewContainerOpts{
		client.WithRuntime(runcRuntime, r.cgroups.RuntimeOptions()),
		client.WithSpec(s),
		client.WithContainerLabels(labels),
	} {
		if err := o(cctx, r.client, &ctr); err != nil {
			return pod.Record{}, fmt.Errorf("creating the sandbox of pod %s: %w", p, err)
		}
	}
	if _, err := r.client.ContainerService().Create(cctx, ctr); err != nil {
		return pod.Record{}, fmt.Errorf("creating the sandbox of pod %s: %w", p, err)
	}
	r.sandboxGroups.put(id, group)
	clock.mark("container")
	r.cfg.Logger.Debug("created a sandbox", clock.attrs("pod", p.String(), "id", id)...)
	return recordFromLabels(id, labels, time.Now()), nil
}

// pinnedKinds are the namespaces of p that staticlet creates and pins: the
// network (with UTS) unless the pod is on the host's, and IPC unless the
// host's.
func pinnedKinds(p *pod.Pod) []netns.Kind {
	var kinds []netns.Kind
	if !p.Spec.HostNetwork {
		kinds = append(kinds, netns.Net, netns.UTS)
	}
	if !p.Spec.HostIPC {
		kinds = append(kinds, netns.IPC)
	}
	return kinds
}

// namespacePaths are the pinned namespaces of sandbox id, for specs.
func (r *Runtime) namespacePaths(id string, p *pod.Pod) map[specs.LinuxNamespaceType]string {
	types := map[netns.Kind]specs.LinuxNamespaceType{netns.Net: specs.NetworkNamespace, netns.UTS: specs.UTSNamespace, netns.IPC: specs.IPCNamespace}
	out := map[specs.LinuxNamespaceType]string{}
	for _, k := range pinnedKinds(p) {
		out[types[k]] = netns.Path(r.sandboxDir(id), k)
	}
	return out
}

// pinnedPaths are the namespaces of sandbox id that are pinned now. A
// namespace that is not (a sandbox made before staticlet pinned them, say)
// is joined through the sandbox's process instead.
func (r *Runtime) pinnedPaths(id string, p *pod.Pod) map[specs.LinuxNamespaceType]string {
	paths := r.namespacePaths(id, p)
	for t, path := range paths {
		if !netns.Pinned(filepath.Dir(path), netns.Kind(filepath.Base(path))) {
			delete(paths, t)
		}
	}
	return paths
}

// sandboxDir holds the pinned namespaces of sandbox id.
func (r *Runtime) sandboxDir(id string) string {
	return filepath.Join(r.cfg.RootDir, "sandboxes", id)
}

// undoContainer removes a container whose creation failed part way, with a
// context that survives the caller's cancellation.
func (r *Runtime) undoContainer(ctx context.Context, c client.Container) {
	ctx, cancel := r.call(context.WithoutCancel(ctx))
	defer cancel()
	if err := r.deleteTask(ctx, c, client.WithProcessKill); err != nil {
		r.cfg.Logger.Warn("cleaning up a container that failed to start", "container", c.ID(), "err", err)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		r.cfg.Logger.Warn("cleaning up a container that failed to start", "container", c.ID(), "err", err)
	}
}
