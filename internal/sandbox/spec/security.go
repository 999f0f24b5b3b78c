package spec

import (
	"encoding/json"
	"fmt"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// safeSysctls are the sysctls the kubelet allows any pod to set: they are
// namespaced and cannot affect other pods or the node.
var safeSysctls = map[string]bool{
	"kernel.shm_rmid_forced":              true,
	"net.ipv4.ip_local_port_range":        true,
	"net.ipv4.tcp_syncookies":             true,
	"net.ipv4.ping_group_range":           true,
	"net.ipv4.ip_unprivileged_port_start": true,
	"net.ipv4.ip_local_reserved_ports":    true,
	"net.ipv4.tcp_keepalive_time":         true,
	"net.ipv4.tcp_fin_timeout":            true,
	"net.ipv4.tcp_keepalive_intvl":        true,
	"net.ipv4.tcp_keepalive_probes":       true,
	"net.ipv4.tcp_rmem":                   true,
	"net.ipv4.tcp_wmem":                   true,
}

// Sysctls returns p's sysctls for its containers. A sysctl outside the
// safe set needs allowUnsafe to say yes; one of a namespace the pod shares
// with the host is refused, as the kubelet does.
func Sysctls(p *pod.Pod, allowUnsafe func(name string) bool) (map[string]string, error) {
	sc := p.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(sc.Sysctls))
	for _, s := range sc.Sysctls {
		ns, ok := pod.SysctlNamespace(s.Name)
		switch {
		case !ok:
			return nil, fmt.Errorf("sysctl %s is not namespaced: setting it would change the node", s.Name)
		case ns == pod.SysctlNet && p.Spec.HostNetwork, ns == pod.SysctlIPC && p.Spec.HostIPC:
			return nil, fmt.Errorf("sysctl %s would change the host's %s namespace, which the pod uses", s.Name, ns)
		case !safeSysctls[s.Name] && (allowUnsafe == nil || !allowUnsafe(s.Name)):
			return nil, fmt.Errorf("sysctl %s is not in the safe set; allow it with --allowed-unsafe-sysctls", s.Name)
		}
		out[s.Name] = s.Value
	}
	return out, nil
}

// SeccompProfileOf is the seccomp profile container c asks for: its own,
// else its pod's; nil when neither sets one.
func SeccompProfileOf(p *pod.Pod, c *v1.Container) *v1.SeccompProfile {
	if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		return sc.SeccompProfile
	}
	if psc := p.Spec.SecurityContext; psc != nil {
		return psc.SeccompProfile
	}
	return nil
}

// applySeccomp sets the container's seccomp filter: containerd's default
// profile for RuntimeDefault, the given JSON profile for Localhost, none
// for Unconfined, an unset profile (the kubelet's default) or a privileged
// container.
func applySeccomp(s *specs.Spec, p *pod.Pod, c *v1.Container, localhost []byte) error {
	if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
		return nil
	}
	prof := SeccompProfileOf(p, c)
	if prof == nil {
		return nil
	}
	switch prof.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		s.Linux.Seccomp = seccomp.DefaultProfile(s)
	case v1.SeccompProfileTypeLocalhost:
		var ls specs.LinuxSeccomp
		if err := json.Unmarshal(localhost, &ls); err != nil {
			return fmt.Errorf("seccomp profile %q: %w", derefString(prof.LocalhostProfile), err)
		}
		s.Linux.Seccomp = &ls
	}
	return nil
}

// runsAsNonRoot tells whether the pod or the container demands a non-root
// user, the container's setting winning.
func runsAsNonRoot(p *pod.Pod, c *v1.Container) bool {
	if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		return *sc.RunAsNonRoot
	}
	if psc := p.Spec.SecurityContext; psc != nil && psc.RunAsNonRoot != nil {
		return *psc.RunAsNonRoot
	}
	return false
}

// applyProcMount unmasks /proc for procMount Unmasked.
func applyProcMount(s *specs.Spec, c *v1.Container) {
	if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount == v1.UnmaskedProcMount {
		s.Linux.MaskedPaths = nil
		s.Linux.ReadonlyPaths = nil
	}
}

// FSGroup is the pod's fsGroup, which owns its emptyDir volumes and joins
// every container's groups; nil when unset.
func FSGroup(p *pod.Pod) *int64 {
	if psc := p.Spec.SecurityContext; psc != nil {
		return psc.FSGroup
	}
	return nil
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
