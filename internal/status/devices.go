package status

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
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

// cdiAnnotationPrefix starts the resource names of a container status'
// allocatedResourcesStatus that stand for a pod's CDI annotations
// (cdi.k8s.io/<key>); any other name is an extended resource of the
// container's limits, whose devices it holds alone.
const cdiAnnotationPrefix = "cdi.k8s.io/"

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
	// HeldBy are the containers that hold it, as their pods' statuses
	// say (allocatedResourcesStatus), sorted by pod then container.
	HeldBy []DeviceHolder `json:"heldBy,omitempty"`
}

// DeviceHolder is a container holding a device.
type DeviceHolder struct {
	// Pod is the pod's key, namespace/name.
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// Resource is the name it holds the device by in its status'
	// allocatedResourcesStatus: the kind, from its resource limits, or
	// cdi.k8s.io/<key>, from its pod's CDI annotation.
	Resource string `json:"resource"`
	// Exclusive is true when the container holds the device alone (by its
	// limits), false when it shares it (by an annotation).
	Exclusive bool `json:"exclusive"`
}

// State is DeviceAllocated when a container holds d alone, DeviceShared
// when containers only share it, DeviceFree when none holds it.
func (d Device) State() string {
	if len(d.HeldBy) == 0 {
		return DeviceFree
	}
	for _, h := range d.HeldBy {
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
// (which the server adds from the pods' statuses).
type DeviceLister func() DeviceList

// HeldDevices returns devs with the containers of pods that hold each
// (HeldBy), from the containers' statuses (init containers too). A
// device that a container holds and no spec names any more is added
// after the others, without a spec, so that it is still seen.
func HeldDevices(devs []Device, pods []v1.Pod) []Device {
	out := make([]Device, len(devs))
	index := make(map[string]int, len(devs))
	for i, d := range devs {
		d.HeldBy = nil
		out[i] = d
		index[d.Name] = i
	}
	known := len(out)
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		for _, statuses := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range statuses {
				for _, rs := range cs.AllocatedResourcesStatus {
					h := DeviceHolder{Pod: key, Container: cs.Name, Resource: string(rs.Name),
						Exclusive: !strings.HasPrefix(string(rs.Name), cdiAnnotationPrefix)}
					for _, r := range rs.Resources {
						name := string(r.ResourceID)
						i, ok := index[name]
						if !ok {
							kind, _, _ := strings.Cut(name, "=")
							i = len(out)
							index[name] = i
							out = append(out, Device{Name: name, Kind: kind})
						}
						out[i].HeldBy = append(out[i].HeldBy, h)
					}
				}
			}
		}
	}
	slices.SortFunc(out[known:], func(a, b Device) int { return cmp.Compare(a.Name, b.Name) })
	for i := range out {
		slices.SortStableFunc(out[i].HeldBy, func(a, b DeviceHolder) int {
			return cmp.Or(cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container))
		})
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
