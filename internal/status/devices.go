package status

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/pod"
)

// The states of a CDI device, as GET /devices and the metrics give them.
const (
	// DeviceFree: no container holds it.
	DeviceFree = "free"
	// DeviceAllocated: a container holds it alone, by its resource limits.
	DeviceAllocated = "allocated"
	// DeviceShared: containers use it only through their pod's CDI
	// annotations, which hold no device alone; it can still be allocated.
	DeviceShared = "shared"
)

// Device is one CDI device of the node, with the containers that hold
// it.
type Device struct {
	// Name is the fully qualified name, vendor.com/class=name.
	Name string `json:"name"`
	// Kind is vendor.com/class.
	Kind string `json:"kind"`
	// Spec is the CDI spec file that names it; empty when no spec names
	// it any more while a container still holds it.
	Spec string `json:"spec,omitempty"`
	// State is DeviceFree, DeviceAllocated or DeviceShared, as HeldBy
	// says (see deviceState).
	State string `json:"state"`
	// HeldBy are the containers that hold it, sorted by pod then
	// container (see HeldDevices).
	HeldBy []DeviceHolder `json:"heldBy,omitempty"`
}

// DeviceHolder is a container holding a device.
type DeviceHolder struct {
	// Pod is the pod's key, namespace/name.
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// Resource is the name it holds the device by: the kind, from its
	// resource limits (as its status' allocatedResourcesStatus names
	// it), or cdi.k8s.io/<key>, from its pod's CDI annotation.
	Resource string `json:"resource"`
	// Exclusive is true when the container holds the device alone (by its
	// limits), false when it shares it (by an annotation).
	Exclusive bool `json:"exclusive"`
}

// deviceState is DeviceAllocated when a container of holders holds a
// device alone, DeviceShared when they only share it, DeviceFree when
// there are none.
func deviceState(holders []DeviceHolder) string {
	if len(holders) == 0 {
		return DeviceFree
	}
	for _, h := range holders {
		if h.Exclusive {
			return DeviceAllocated
		}
	}
	return DeviceShared
}

// DeviceList is the answer of GET /devices.
type DeviceList struct {
	// SpecDirs are the directories the CDI specs are read from.
	SpecDirs []string `json:"specDirs"`
	Devices  []Device `json:"devices"`
}

// DeviceLister lists the node's CDI devices, without their holders
// and states (which the server adds from the pods, see HeldDevices).
type DeviceLister func() DeviceList

// HeldDevices returns devs with the containers of pods that hold each
// (HeldBy), and so their State, init containers too (but for a device
// that one, done, passed on to a later container of its pod): those
// their statuses name (allocatedResourcesStatus), and, for every
// container made (with a
// container ID), the devices its pod's CDI annotations name that its
// status does not (vendor.com/class=all standing for every device of the
// kind in devs, unless one is named all). A device that a container
// holds and devs lacks (its spec went) is added after the others,
// without a spec, so that it is still seen.
func HeldDevices(devs []Device, pods []v1.Pod) []Device {
	h := holdings{out: make([]Device, len(devs)), index: make(map[string]int, len(devs))}
	for i, d := range devs {
		d.HeldBy = nil
		h.out[i] = d
		h.index[d.Name] = i
	}
	known := len(devs)
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		annotations := cdiAnnotations(p.Annotations)
		passedOn := passedOnDevices(&p)
		for k, statuses := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range statuses {
				done := k == 0 && initDone(&p, cs)
				reported := map[string]bool{}
				for _, rs := range cs.AllocatedResourcesStatus {
					reported[string(rs.Name)] = true
					// A resource not named for an annotation is a limit's
					// kind, whose devices the container holds alone.
					holder := DeviceHolder{Pod: key, Container: cs.Name, Resource: string(rs.Name),
						Exclusive: !strings.HasPrefix(string(rs.Name), pod.AnnotationCDIPrefix)}
					for _, r := range rs.Resources {
						if !done || !passedOn[string(r.ResourceID)] {
							h.add(string(r.ResourceID), holder)
						}
					}
				}
				if cs.ContainerID == "" {
					continue
				}
				for _, a := range annotations {
					if reported[a.key] {
						continue
					}
					holder := DeviceHolder{Pod: key, Container: cs.Name, Resource: a.key}
					for _, name := range h.expand(a.devices, devs) {
						h.add(name, holder)
					}
				}
			}
		}
	}
	slices.SortFunc(h.out[known:], func(a, b Device) int { return cmp.Compare(a.Name, b.Name) })
	for i := range h.out {
		slices.SortStableFunc(h.out[i].HeldBy, func(a, b DeviceHolder) int {
			return cmp.Or(cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container))
		})
		h.out[i].State = deviceState(h.out[i].HeldBy)
	}
	return h.out
}

// passedOnDevices are the devices that p's containers other than its
// init containers done (initDone) report: those may have come from one
// of these, which no longer holds them.
func passedOnDevices(p *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for k, statuses := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if k == 0 && initDone(p, cs) {
				continue
			}
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, r := range rs.Resources {
					out[string(r.ResourceID)] = true
				}
			}
		}
	}
	return out
}

// initDone tells whether cs, the status of an init container of p, says
// it has run to its end, and it is not a sidecar: its devices went to
// the pod's later containers, as the runtime hands them out.
func initDone(p *v1.Pod, cs v1.ContainerStatus) bool {
	if cs.State.Terminated == nil {
		return false
	}
	i := slices.IndexFunc(p.Spec.InitContainers, func(c v1.Container) bool { return c.Name == cs.Name })
	return i < 0 || p.Spec.InitContainers[i].RestartPolicy == nil || *p.Spec.InitContainers[i].RestartPolicy != v1.ContainerRestartPolicyAlways
}

// holdings gathers HeldDevices' answer: the devices, found by name.
type holdings struct {
	out   []Device
	index map[string]int
}

// add records that holder holds the device name, adding the device when
// it is not known.
func (h *holdings) add(name string, holder DeviceHolder) {
	i, ok := h.index[name]
	if !ok {
		kind, _, _ := strings.Cut(name, "=")
		i = len(h.out)
		h.index[name] = i
		h.out = append(h.out, Device{Name: name, Kind: kind})
	}
	if !slices.Contains(h.out[i].HeldBy, holder) {
		h.out[i].HeldBy = append(h.out[i].HeldBy, holder)
	}
}

// expand replaces each vendor.com/class=all of names by the devices of
// the kind in devs, unless devs has a device of that name.
func (h *holdings) expand(names []string, devs []Device) []string {
	var out []string
	for _, n := range names {
		kind, name, _ := strings.Cut(n, "=")
		if _, ok := h.index[n]; ok || name != "all" {
			out = append(out, n)
			continue
		}
		for _, d := range devs {
			if d.Kind == kind {
				out = append(out, d.Name)
			}
		}
	}
	return out
}

// cdiAnnotation is one of a pod's CDI annotations: its key
// (cdi.k8s.io/<key>) and the devices it names.
type cdiAnnotation struct {
	key     string
	devices []string
}

// cdiAnnotations returns the CDI annotations of a pod, by key.
func cdiAnnotations(annotations map[string]string) []cdiAnnotation {
	var out []cdiAnnotation
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if !strings.HasPrefix(k, pod.AnnotationCDIPrefix) {
			continue
		}
		a := cdiAnnotation{key: k}
		for _, d := range strings.Split(annotations[k], ",") {
			if d = strings.TrimSpace(d); d != "" {
				a.devices = append(a.devices, d)
			}
		}
		out = append(out, a)
	}
	return out
}

// deviceCapacity counts devs by kind, as the kubelet reports the devices
// of a device plugin in its node's capacity and allocatable: an extended
// resource named by the kind.
func deviceCapacity(devs []Device) v1.ResourceList {
	counts := map[string]int64{}
	for _, d := range devs {
		counts[d.Kind]++
	}
	out := make(v1.ResourceList, len(counts))
	for kind, n := range counts {
		out[v1.ResourceName(kind)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// devices serves GET /devices.
func (s *Server) devices(w http.ResponseWriter, r *http.Request) {
	list := DeviceList{SpecDirs: []string{}, Devices: []Device{}}
	if s.cfg.Devices != nil {
		list = s.cfg.Devices()
		if list.SpecDirs == nil {
			list.SpecDirs = []string{}
		}
	}
	list.Devices = HeldDevices(list.Devices, s.cfg.Store.Pods())
	s.writeJSON(w, r, http.StatusOK, list)
}

// Devices returns the node's CDI devices with the containers that hold
// them (GET /devices).
func (c *Client) Devices(ctx context.Context) (*DeviceList, error) {
	var list DeviceList
	if err := c.getJSON(ctx, "/devices", &list); err != nil {
		return nil, fmt.Errorf("listing devices: %w", err)
	}
	return &list, nil
}
