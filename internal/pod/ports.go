package pod

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ContainerPort resolves the port of a probe or hook handler to a number:
// a number as it is, a name as the container port of that name (or, as the
// kubelet allows, a name that is a number).
func ContainerPort(port intstr.IntOrString, c *v1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("unable to find port %q in container %q", port.StrVal, c.Name)
}
