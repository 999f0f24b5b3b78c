package pod

import v1 "k8s.io/api/core/v1"

// QOSClass is the pod's quality-of-service class as Kubernetes defines it
// (GetPodQOS): BestEffort when no container requests or limits cpu or
// memory, Guaranteed when every container limits both and requests what it
// limits, else Burstable. Zero quantities count as unset. The status shows
// it, and it decides the pod's cgroup and its containers' oom_score_adj.
func QOSClass(spec *v1.PodSpec) v1.PodQOSClass {
	anySet, guaranteed := false, true
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[r]
				lim, hasLim := c.Resources.Limits[r]
				hasReq = hasReq && !req.IsZero()
				hasLim = hasLim && !lim.IsZero()
				if hasReq || hasLim {
					anySet = true
				}
				if !hasLim || (hasReq && req.Cmp(lim) != 0) {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !anySet:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}

// Critical tells whether a pod of spec is critical to the node, as the
// kubelet decides (IsCriticalPod by priority): its priority is that of the
// system-cluster-critical class or above. Decoding resolves the two
// built-in class names to their priorities, so either name counts.
func Critical(spec *v1.PodSpec) bool {
	return spec.Priority != nil && *spec.Priority >= SystemClusterCriticalPriority
}
