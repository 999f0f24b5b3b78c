package printers

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// Devices writes the node's CDI devices, as status.HeldDevices gives
// them, as a table: KIND DEVICE SPEC STATE HELD BY. DEVICE is the name within the kind (the qualified name
// is KIND=DEVICE), STATE free, allocated or shared, and HELD BY the
// containers holding it as namespace/pod/container, comma-separated; a
// container that shares a device another holds alone is marked
// "(shared)".
func Devices(w io.Writer, devs []status.Device) error {
	tw := newTable(w)
	tw.header("KIND\tDEVICE\tSPEC\tSTATE\tHELD BY")
	for _, d := range devs {
		_, name, _ := strings.Cut(d.Name, "=")
		state := d.State
		holders := make([]string, len(d.HeldBy))
		for i, h := range d.HeldBy {
			holders[i] = h.Pod + "/" + h.Container
			if state == status.DeviceAllocated && !h.Exclusive {
				holders[i] += " (shared)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Kind, name, orNone(d.Spec), state, orNone(strings.Join(holders, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing devices: %w", err)
	}
	return nil
}

// devices writes the devices a container holds, by the resource it
// holds them by, from its status' allocatedResourcesStatus: its limits'
// kinds, and the pod's cdi.k8s.io/ annotations, which, when the status
// does not name their devices, are written as the pod gives them for a
// container that was made. A device reported Unhealthy is marked so (CDI
// tells no health: staticlet reports Unknown, which is not written).
// Nothing when it holds none.
func (d *describer) devices(annotations map[string]string, st *v1.ContainerStatus) {
	if st == nil {
		return
	}
	type entry struct{ resource, devices string }
	var entries []entry
	reported := map[string]bool{}
	for _, rs := range st.AllocatedResourcesStatus {
		reported[string(rs.Name)] = true
		ids := make([]string, len(rs.Resources))
		for i, r := range rs.Resources {
			ids[i] = string(r.ResourceID)
			if r.Health == v1.ResourceHealthStatusUnhealthy {
				ids[i] += " (" + string(r.Health) + ")"
			}
		}
		entries = append(entries, entry{string(rs.Name), orNone(strings.Join(ids, ", "))})
	}
	if st.ContainerID != "" {
		for _, k := range slices.Sorted(maps.Keys(annotations)) {
			if strings.HasPrefix(k, pod.AnnotationCDIPrefix) && !reported[k] {
				entries = append(entries, entry{k, strings.Join(strings.Fields(strings.ReplaceAll(annotations[k], ",", " ")), ", ")})
			}
		}
	}
	if len(entries) == 0 {
		return
	}
	d.line(2, "Devices:\n")
	for _, e := range entries {
		d.line(3, "%s:\t%s\n", e.resource, e.devices)
	}
}
