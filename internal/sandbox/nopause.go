package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// Sandboxes without a pause process.
//
// A pause process holds what its pod's containers share. staticlet pins a
// pod's network, UTS and IPC namespaces apart from any process (netns),
// and makes the pod's cgroup itself, so a pause process holds something
// only when the pod's containers share a PID namespace
// (shareProcessNamespace): the pause is its PID 1, which reaps the pod's
// orphans. Every other sandbox is made without one (needsPause): its
// containerd container record carries the pod's labels and the spec a
// pause would have had (its shim group, cgroup and namespaces), and no
// task. That costs no runc create and no process per pod, and nothing
// waits for it.
//
// Such a sandbox is up for as long as what it stands for is there: its
// pinned namespaces, which a reboot (or an unmount) takes away, with the
// pod's cgroup. It records the boot it was made in (LabelBoot); in
// another boot, or with a namespace no longer pinned, it reads as exited
// and not pinned (sandboxGone), and the reconciler re-creates the pod, as
// the kubelet does when a sandbox is lost.

// pauseNone is LabelPause's value on a sandbox without a pause process.
const pauseNone = "none"

// needsPause tells whether a new sandbox of p has a pause process: only
// when p's containers share its PID namespace.
func needsPause(p *pod.Pod) bool {
	s := &p.Spec
	return !s.HostPID && s.ShareProcessNamespace != nil && *s.ShareProcessNamespace
}

// bootPath holds the kernel's ID of the current boot.
const bootPath = "/proc/sys/kernel/random/boot_id"

// bootID reads the kernel's ID of the current boot.
func bootID() (string, error) {
	b, err := os.ReadFile(bootPath)
	if err != nil {
		return "", fmt.Errorf("reading the boot ID: %w", err)
	}
	return string(bytes.TrimSpace(b)), nil
}

// noPauseLabels are the labels that make a new sandbox of p one without a
// pause process.
func (r *Runtime) noPauseLabels(p *pod.Pod) map[string]string {
	var pins []string
	for _, k := range pinnedKinds(p) {
		pins = append(pins, string(k))
	}
	return map[string]string{LabelPause: pauseNone, LabelBoot: r.host.boot, LabelPins: strings.Join(pins, ",")}
}

// sandboxGone tells why sandbox id, without a pause process and with
// labels, is down, or "" when it is up: made in another boot of the
// node, or a namespace of it no longer pinned.
func (r *Runtime) sandboxGone(id string, labels map[string]string) string {
	if labels[LabelBoot] != r.host.boot {
		return "the node restarted since the sandbox was made"
	}
	dir := r.sandboxDir(id)
	for _, k := range strings.Split(labels[LabelPins], ",") {
		if k != "" && !netns.Pinned(dir, netns.Kind(k)) {
			return fmt.Sprintf("its %s namespace is no longer pinned", k)
		}
	}
	return ""
}

// noPauseStarted is StartSandbox for sandbox sb without a pause process:
// there is nothing to start, and it runs unless it is gone, which no
// start brings back.
func (r *Runtime) noPauseStarted(ctx context.Context, sb pod.Record) (pod.Record, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.ContainerService().Get(ctx, sb.ID)
	if err != nil {
		return sb, fmt.Errorf("loading sandbox %s: %w", sb.ID, err)
	}
	if why := r.sandboxGone(sb.ID, c.Labels); why != "" {
		return sb, fmt.Errorf("sandbox %s has no pause process to start, and is gone: %s", sb.ID, why)
	}
	sb.State, sb.Pid = pod.TaskRunning, 0
	return sb, nil
}

// pinsGone tells whether a namespace the spec of sandbox c joins by
// path, one pinned for it, is no longer pinned there: its pin file is
// left, not a namespace, or gone.
func pinsGone(c containers.Container) bool {
	if c.Spec == nil {
		return false
	}
	v, err := typeurl.UnmarshalAny(c.Spec)
	if err != nil {
		return false
	}
	s, ok := v.(*specs.Spec)
	if !ok || s.Linux == nil {
		return false
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Path == "" || strings.HasPrefix(ns.Path, "/proc/") {
			continue
		}
		if !netns.Pinned(filepath.Dir(ns.Path), netns.Kind(filepath.Base(ns.Path))) {
			return true
		}
	}
	return false
}
