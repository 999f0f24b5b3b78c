package pod

import "github.com/distribution/reference"

// ImageName returns the full name a container's image reference stands for,
// as containerd stores it ("busybox" is docker.io/library/busybox:latest);
// a reference that does not parse is returned as it is.
func ImageName(ref string) string {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ref
	}
	return named.String()
}
