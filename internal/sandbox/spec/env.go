package spec

import (
	"errors"
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/pod"
)

// NodeFacts are what the environment of a container may refer to beyond
// its pod: the node's address and capacity (what a resource limit that is
// not set comes to, as with the kubelet).
type NodeFacts struct {
	// HostIPs are the node's addresses, the primary first (--node-ip's).
	HostIPs []string
	// PodIPs are the pod's own addresses off the host network (on it, the
	// pod's addresses are HostIPs).
	PodIPs []string
	CPU    resource.Quantity
	Memory resource.Quantity
}

// resolveEnv returns c's environment in order, as the kubelet makes it:
// the variables of its envFrom sources first, then its env, each valueFrom
// resolved and $(VAR) references to variables defined before it (envFrom's
// included) expanded; an env variable overrides one of the same name from
// envFrom, in its place. An optional reference to a missing ConfigMap,
// Secret or key leaves its variable out. A reference that cannot be
// resolved is a pod.WaitingError (CreateContainerConfigError) with the
// kubelet's message.
func resolveEnv(p *pod.Pod, c *v1.Container, node NodeFacts) ([]v1.EnvVar, map[string]string, error) {
	from, err := envFromVars(p, c)
	if err != nil {
		return nil, nil, err
	}
	vals := make(map[string]string, len(from)+len(c.Env))
	out := make([]v1.EnvVar, 0, len(from)+len(c.Env))
	at := make(map[string]int, len(from)+len(c.Env))
	set := func(name, value string) {
		vals[name] = value
		if i, ok := at[name]; ok {
			out[i].Value = value
			return
		}
		at[name] = len(out)
		out = append(out, v1.EnvVar{Name: name, Value: value})
	}
	for _, e := range from {
		set(e.Name, e.Value)
	}
	for i, e := range c.Env {
		v := expand(e.Value, vals)
		if e.ValueFrom != nil {
			var ok bool
			if v, ok, err = valueFrom(p, c, e.ValueFrom, node); err != nil {
				if isWaiting(err) {
					return nil, nil, err
				}
				return nil, nil, fmt.Errorf("env[%d] %s: %w", i, e.Name, err)
			}
			if !ok {
				continue
			}
		}
		set(e.Name, v)
	}
	return out, vals, nil
}

// isWaiting tells whether err is a pod.WaitingError, whose message is the
// kubelet's and goes unwrapped.
func isWaiting(err error) bool {
	var we *pod.WaitingError
	return errors.As(err, &we)
}

// valueFrom resolves a variable's source; ok is false when the variable
// is left out (an optional reference to what is missing).
func valueFrom(p *pod.Pod, c *v1.Container, src *v1.EnvVarSource, node NodeFacts) (value string, ok bool, err error) {
	switch {
	case src.FieldRef != nil:
		value, err = fieldValue(p, src.FieldRef.FieldPath, node)
		return value, err == nil, err
	case src.ResourceFieldRef != nil:
		value, err = resourceValue(p, c, src.ResourceFieldRef, node)
		return value, err == nil, err
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		return keyRefValue(p, pod.KindConfigMap, r.Name, r.Key, r.Optional)
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		return keyRefValue(p, pod.KindSecret, r.Name, r.Key, r.Optional)
	}
	// Validation refuses the other sources (fileKeyRef).
	return "", false, fmt.Errorf("unsupported value source")
}

// fieldValue is the downward API's value of a pod field.
func fieldValue(p *pod.Pod, path string, node NodeFacts) (string, error) {
	podIPs := node.PodIPs
	if p.Spec.HostNetwork {
		podIPs = node.HostIPs
	}
	podIP := ""
	if len(podIPs) > 0 {
		podIP = podIPs[0]
	}
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(node.HostIPs) == 0 {
			return "", nil
		}
		return node.HostIPs[0], nil
	case "status.hostIPs":
		// The kubelet's value, as podIPs': every address, comma-separated.
		return strings.Join(node.HostIPs, ","), nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		// The kubelet's value: every address, comma-separated.
		return strings.Join(podIPs, ","), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("field %q is not supported", path)
}

// resourceValue is a container's request or limit in units of the divisor,
// rounded up; a limit not set is the node's capacity.
func resourceValue(p *pod.Pod, c *v1.Container, ref *v1.ResourceFieldSelector, node NodeFacts) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		c = findContainer(p, ref.ContainerName)
		if c == nil {
			return "", fmt.Errorf("no container %q in the pod", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resource %q is not supported", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, set := list[v1.ResourceName(name)]
	if !set && kind == "limits" {
		switch v1.ResourceName(name) {
		case v1.ResourceCPU:
			q = node.CPU
		case v1.ResourceMemory:
			q = node.Memory
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if v1.ResourceName(name) == v1.ResourceCPU {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

func findContainer(p *pod.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// expand replaces $(NAME) in s with vals[NAME], as the kubelet does: $$
// escapes a $, and a reference to an unknown variable is left as written.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandAll expands every string of list.
func expandAll(list []string, vals map[string]string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = expand(s, vals)
	}
	return out
}
