package spec

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// terminationMount binds hostFile, the file that holds the message of this
// instance of c, read-write at c's terminationMessagePath, as the kubelet
// does. There is none when hostFile or the path is empty, or when c mounts
// a volume at the path: the container keeps its volume.
func terminationMount(c *v1.Container, hostFile string) []specs.Mount {
	dst := c.TerminationMessagePath
	if hostFile == "" || dst == "" || slices.ContainsFunc(c.VolumeMounts, func(vm v1.VolumeMount) bool { return MountPath(vm) == dst }) {
		return nil
	}
	return []specs.Mount{{Destination: dst, Type: "bind", Source: hostFile, Options: []string{"rbind", "rprivate", "rw"}}}
}
