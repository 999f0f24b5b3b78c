package spec

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Propagation options of a volume mount, as containerd's CRI gives them
// for the kubelet's mountPropagation modes.
const (
	propagationPrivate = "rprivate" // None, and unset
	propagationSlave   = "rslave"   // HostToContainer
	propagationShared  = "rshared"  // Bidirectional
)

// volumeMounts binds each of the container's volume mounts from the host
// path its volume resolved to, with the propagation its mountPropagation
// asks for, and sets the propagation of the container's root that those
// need (containerd's CRI does the same: a Bidirectional mount needs a
// shared root, a HostToContainer one at least a slave root). Volumes the
// kubelet always mounts read-only (configMap, secret, projected,
// downwardAPI) are read-only whatever the mount says.
func volumeMounts(s *specs.Spec, p *pod.Pod, c *v1.Container, volumes map[string]string, vals map[string]string) ([]specs.Mount, error) {
	var out []specs.Mount
	for i, vm := range c.VolumeMounts {
		src, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("container %q: volumeMounts[%d]: volume %q has no host path", c.Name, i, vm.Name)
		}
		src, err := mountSource(vm, src, vals)
		if err != nil {
			return nil, fmt.Errorf("container %q: volumeMounts[%d]: %w", c.Name, i, err)
		}
		prop, err := mountPropagation(c, vm.MountPropagation)
		if err != nil {
			return nil, fmt.Errorf("container %q: volumeMounts[%d]: %w", c.Name, i, err)
		}
		switch {
		case prop == propagationShared:
			s.Linux.RootfsPropagation = propagationShared
		case prop == propagationSlave && s.Linux.RootfsPropagation != propagationShared:
			s.Linux.RootfsPropagation = propagationSlave
		}
		opts := []string{"rbind", prop}
		if vm.ReadOnly || readOnlyVolume(p, vm.Name) {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		out = append(out, specs.Mount{Destination: MountPath(vm), Type: "bind", Source: src, Options: opts})
	}
	return out, nil
}

// MountPath is where vm is mounted in the container: its mountPath, made
// absolute from / when it is relative, as the kubelet makes it.
func MountPath(vm v1.VolumeMount) string {
	if path.IsAbs(vm.MountPath) {
		return vm.MountPath
	}
	return path.Clean("/" + vm.MountPath)
}

// mountPropagation is the propagation option of a mount with mode m.
// Bidirectional propagation lets a container mount on the host, so, as
// with the kubelet, only a privileged container may have it.
func mountPropagation(c *v1.Container, m *v1.MountPropagationMode) (string, error) {
	if m == nil {
		return propagationPrivate, nil
	}
	switch *m {
	case v1.MountPropagationNone:
		return propagationPrivate, nil
	case v1.MountPropagationHostToContainer:
		return propagationSlave, nil
	case v1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return "", fmt.Errorf("mountPropagation: Bidirectional mount propagation is available only to privileged containers")
		}
		return propagationShared, nil
	}
	return "", fmt.Errorf("invalid MountPropagation mode: %q", *m)
}

// readOnlyVolume tells whether the pod's volume name is one the kubelet
// mounts read-only in every container: those whose files it writes
// (configMap, secret, projected, downwardAPI).
func readOnlyVolume(p *pod.Pod, name string) bool {
	for _, v := range p.Spec.Volumes {
		if v.Name == name {
			return v.DownwardAPI != nil || v.ConfigMap != nil || v.Secret != nil || v.Projected != nil
		}
	}
	return false
}

// mountSource is the host path a volume mount binds: the volume's path, or
// the subPath (or the subPathExpr expanded with the container's variables)
// inside it.
func mountSource(vm v1.VolumeMount, volumePath string, vals map[string]string) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		sub = expand(vm.SubPathExpr, vals)
	}
	if sub == "" {
		return volumePath, nil
	}
	if filepath.IsAbs(sub) || slices.Contains(strings.Split(filepath.ToSlash(sub), "/"), "..") {
		return "", fmt.Errorf("subPath %q must be relative and stay inside its volume", sub)
	}
	return filepath.Join(volumePath, sub), nil
}

// VolumeFile is one file of a volume staticlet writes: its content and
// permissions.
type VolumeFile struct {
	Data []byte
	Mode fs.FileMode
}

// DownwardAPIFiles are the files of a downwardAPI volume of p, by their
// cleaned path in the volume, as the kubelet writes them: a field's value
// as it is, labels and annotations as sorted key="value" lines, and a
// container's request or limit in units of the divisor (a limit not set is
// the node's capacity). Each file has its item's mode, or the volume's
// default mode.
func DownwardAPIFiles(p *pod.Pod, src *v1.DownwardAPIVolumeSource, node NodeFacts) (map[string]VolumeFile, error) {
	defaultMode := int32(v1.DownwardAPIVolumeSourceDefaultMode)
	if src.DefaultMode != nil {
		defaultMode = *src.DefaultMode
	}
	out := make(map[string]VolumeFile, len(src.Items))
	for i, item := range src.Items {
		mode := defaultMode
		if item.Mode != nil {
			mode = *item.Mode
		}
		var (
			value string
			err   error
		)
		switch {
		case item.FieldRef != nil:
			value, err = volumeFieldValue(p, item.FieldRef.FieldPath, node)
		case item.ResourceFieldRef != nil:
			c := findContainer(p, item.ResourceFieldRef.ContainerName)
			if c == nil {
				err = fmt.Errorf("no container %q in the pod", item.ResourceFieldRef.ContainerName)
				break
			}
			value, err = resourceValue(p, c, item.ResourceFieldRef, node)
		default:
			err = fmt.Errorf("neither fieldRef nor resourceFieldRef")
		}
		if err != nil {
			return nil, fmt.Errorf("items[%d] (%s): %w", i, item.Path, err)
		}
		out[filepath.Clean(item.Path)] = VolumeFile{Data: []byte(value), Mode: fs.FileMode(mode) & fs.ModePerm}
	}
	return out, nil
}

// volumeFieldValue is a pod field's value in a downwardAPI volume: what an
// environment variable gets, or all the labels or annotations.
func volumeFieldValue(p *pod.Pod, path string, node NodeFacts) (string, error) {
	switch path {
	case "metadata.labels":
		return formatMap(p.Labels), nil
	case "metadata.annotations":
		return formatMap(p.Annotations), nil
	}
	return fieldValue(p, path, node)
}

// formatMap writes m as the kubelet's downward API does (fieldpath's
// FormatMap): one key="value" line per key, sorted, the value quoted as Go
// quotes it, with no newline after the last.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%s=%q", k, m[k])
	}
	return strings.Join(lines, "\n")
}

// MemoryVolumeSize is the size in bytes of the tmpfs of a Memory emptyDir
// of p, as the kubelet sizes it (calculateEmptyDirMemorySize): the node's
// memory, or less, the pod's memory limit when every container has one,
// or less again, the volume's sizeLimit. 0 means no size option: the
// kernel's default of half the node's memory.
func MemoryVolumeSize(p *pod.Pod, ed *v1.EmptyDirVolumeSource, nodeMemory int64) int64 {
	size := nodeMemory
	smaller := func(n int64) {
		if n > 0 && (size <= 0 || n <= size) {
			size = n
		}
	}
	if allLimit(p, v1.ResourceMemory) {
		limit := podTotal(p, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits })[v1.ResourceMemory]
		smaller(limit.Value())
	}
	if ed.SizeLimit != nil {
		smaller(ed.SizeLimit.Value())
	}
	return max(size, 0)
}
