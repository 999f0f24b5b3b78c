package pod

import (
	"reflect"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Priorities of the built-in priority classes, which the kubelet's critical
// pods (etcd, kube-apiserver, ...) name. With no apiserver there is no
// admission plugin to resolve a class, so these two are resolved here.
const (
	SystemNodeCriticalPriority    int32 = 2000001000
	SystemClusterCriticalPriority int32 = 2000000000
)

// setDefaults fills in what the apiserver's defaulting fills in for a Pod
// (k8s.io/kubernetes pkg/apis/core/v1/defaults.go), so that a pod here looks
// as it would in a cluster. The static pod additions (name, node, UID,
// annotations, toleration) are applied later, by setIdentity.
func setDefaults(p *v1.Pod) {
	p.APIVersion, p.Kind = "v1", "Pod"
	s := &p.Spec
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr(int64(v1.DefaultTerminationGracePeriodSeconds))
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	// serviceAccount is the deprecated name of serviceAccountName: the
	// newer wins, and the two are kept the same, as the apiserver's
	// defaults keep them; a pod without the alias is left without it, so
	// that its hashes stay those of earlier releases.
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	if s.DeprecatedServiceAccount != "" {
		s.DeprecatedServiceAccount = s.ServiceAccountName
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr(v1.DefaultEnableServiceLinks)
	}
	if s.Priority == nil {
		switch s.PriorityClassName {
		case "system-node-critical":
			s.Priority = ptr(SystemNodeCriticalPriority)
		case "system-cluster-critical":
			s.Priority = ptr(SystemClusterCriticalPriority)
		}
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		port := &c.Ports[i]
		if port.Protocol == "" {
			port.Protocol = v1.ProtocolTCP
		}
		// On the host's network a container port is a host port.
		if hostNetwork && port.HostPort == 0 {
			port.HostPort = port.ContainerPort
		}
	}
	// Limits without requests request the limits.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = v1.ResourceList{}
			}
			c.Resources.Requests[name] = limit.DeepCopy()
		}
	}
	roundResources(c.Resources.Limits)
	roundResources(c.Resources.Requests)
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if pr == nil {
			continue
		}
		if pr.TimeoutSeconds == 0 {
			pr.TimeoutSeconds = 1
		}
		if pr.PeriodSeconds == 0 {
			pr.PeriodSeconds = 10
		}
		if pr.SuccessThreshold == 0 {
			pr.SuccessThreshold = 1
		}
		if pr.FailureThreshold == 0 {
			pr.FailureThreshold = 3
		}
		defaultHTTPGet(pr.HTTPGet)
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			defaultHTTPGet(l.PostStart.HTTPGet)
		}
		if l.PreStop != nil {
			defaultHTTPGet(l.PreStop.HTTPGet)
		}
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

// roundResources rounds quantities up to thousandths, as the apiserver does
// (a request of 0.0001 CPU becomes 1m).
func roundResources(l v1.ResourceList) {
	for name, q := range l {
		q.RoundUp(resource.Milli)
		l[name] = q
	}
}

// defaultPullPolicy is Always for an image with the tag latest or no tag
// and no digest, IfNotPresent otherwise. A reference that does not parse
// gets IfNotPresent, as in the apiserver.
func defaultPullPolicy(image string) v1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return v1.PullIfNotPresent
	}
	tag := ""
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if _, digested := named.(reference.Digested); tag == "" && !digested {
		tag = "latest"
	}
	if tag == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

func defaultVolume(v *v1.Volume) {
	if volumeTypes(&v.VolumeSource) == nil {
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr(v1.HostPathUnset)
	}
	if d := v.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptr(v1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultFieldRefs(d.Items)
	}
	if c := v.ConfigMap; c != nil && c.DefaultMode == nil {
		c.DefaultMode = ptr(v1.ConfigMapVolumeSourceDefaultMode)
	}
	if s := v.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptr(v1.SecretVolumeSourceDefaultMode)
	}
	if pr := v.Projected; pr != nil {
		if pr.DefaultMode == nil {
			pr.DefaultMode = ptr(v1.ProjectedVolumeSourceDefaultMode)
		}
		for _, src := range pr.Sources {
			if src.DownwardAPI != nil {
				defaultFieldRefs(src.DownwardAPI.Items)
			}
		}
	}
}

// defaultFieldRefs gives the fieldRefs of downward API files their
// apiVersion, v1.
func defaultFieldRefs(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// volumeTypes returns the JSON names of the sources set in a volume
// (hostPath, configMap, ...). Reflection keeps it right as core/v1 grows new
// volume types: a new one is simply not supported until it is added to
// validation.
func volumeTypes(src *v1.VolumeSource) []string {
	var names []string
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			names = append(names, jsonName(v.Type().Field(i)))
		}
	}
	return names
}

func jsonName(f reflect.StructField) string {
	name := f.Tag.Get("json")
	for i := range len(name) {
		if name[i] == ',' {
			return name[:i]
		}
	}
	return name
}

func ptr[T any](v T) *T { return &v }
