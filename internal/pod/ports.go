package pod

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

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

// HTTPGetURL is the URL an httpGet probe or hook requests at host and
// port: the handler's scheme (http unless set) and path, with its query.
func HTTPGetURL(g *v1.HTTPGetAction, host string, port int) *url.URL {
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = strings.ToLower(string(g.Scheme))
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	return u
}
