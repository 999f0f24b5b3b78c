// Package storagelimit enforces the local ephemeral storage limits of the
// pods that run: each container's resources.limits["ephemeral-storage"],
// the pod's total (the sum of its containers' limits), and each disk-backed
// emptyDir volume's sizeLimit, checked in the kubelet's order with the
// kubelet's messages.
//
// What counts, as with the kubelet: a container uses its writable layer and
// its log; a pod, its running containers' use and its emptyDir volumes on
// disk. An emptyDir of medium Memory is a tmpfs that its size limit bounds
// already (the sandbox mounts it with size=), so it is not measured here.
//
// What is done differs from the kubelet, which evicts the whole pod (and
// never recreates a static one): only the containers at fault are killed,
// their exit reported with reason Evicted and the kubelet's message, and
// they start again as their pod's restartPolicy says, with its back-off. A
// container over its own limit is the one killed; for an emptyDir over its
// sizeLimit, the running containers that mount it; for the pod's total, all
// its running containers. A critical pod (pod.Critical) is never killed: it
// gets a Warning event instead. No other pod is touched.
//
// A Guard measures through a Meter (the runtime) every Config.Period, on
// one goroutine that Run owns; the decision (Decide) is pure.
package storagelimit
