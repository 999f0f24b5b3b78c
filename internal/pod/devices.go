package pod

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// Devices reach a container through the Container Device Interface (CDI),
// as containerd's CRI and podman give them: a vendor's CDI spec names each
// device as vendor.com/class=name and says what a container needs to use
// it. A pod asks for devices in the two forms users write:
//
//   - an extended resource in a container's resources.limits whose name is
//     a CDI kind (vendor.com/class: N): N devices of that kind, held by the
//     container alone;
//   - the CDI annotations on the pod (cdi.k8s.io/<key>:
//     vendor.com/class=name[,...], or vendor.com/class=all), for every
//     container of the pod, not held exclusively.
//
// With no device plugin (which needs an apiserver), every extended
// resource a pod asks for is a CDI kind, which the node must know.

// AnnotationCDIPrefix starts the keys of the CDI annotations.
const AnnotationCDIPrefix = "cdi.k8s.io/"

// DeviceRequest is a container's request for devices of a kind.
type DeviceRequest struct {
	Container string
	// Field is the limit's field path, for errors:
	// spec.containers[0].resources.limits[example.com/gpu].
	Field string
	Kind  string // vendor.com/class
	Count int64
}

// DeviceRequests returns the requests of p's containers (init containers
// first) for devices: their extended resource limits, in field order.
func (p *Pod) DeviceRequests() []DeviceRequest {
	var out []DeviceRequest
	for _, list := range []struct {
		path string
		cs   []v1.Container
	}{{"spec.initContainers", p.Spec.InitContainers}, {"spec.containers", p.Spec.Containers}} {
		for i, c := range list.cs {
			for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
				if !isExtendedResource(name) || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
					continue
				}
				q := c.Resources.Limits[name]
				out = append(out, DeviceRequest{
					Container: c.Name,
					Field:     fmt.Sprintf("%s[%d].resources.limits[%s]", list.path, i, name),
					Kind:      string(name),
					Count:     q.Value(),
				})
			}
		}
	}
	return out
}

// DeviceRef is a device a CDI annotation of a pod names.
type DeviceRef struct {
	Field string // metadata.annotations[cdi.k8s.io/key]
	Name  string // vendor.com/class=name, or vendor.com/class=all
}

// CDIDevices returns the devices p's CDI annotations name, by annotation
// key and then in the order written.
func (p *Pod) CDIDevices() []DeviceRef {
	var out []DeviceRef
	for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
		if !strings.HasPrefix(k, AnnotationCDIPrefix) {
			continue
		}
		for _, d := range strings.Split(p.Annotations[k], ",") {
			if d = strings.TrimSpace(d); d != "" {
				out = append(out, DeviceRef{Field: "metadata.annotations[" + k + "]", Name: d})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b DeviceRef) int { return cmp.Compare(a.Field, b.Field) })
	return out
}

// DeviceKind returns the kind of a qualified device name
// (vendor.com/class=name gives vendor.com/class).
func DeviceKind(name string) string {
	kind, _, _ := strings.Cut(name, "=")
	return kind
}

// cdiAnnotations checks the syntax of p's CDI annotations: each names
// qualified CDI devices, comma-separated.
func (v *validator) cdiAnnotations(p *v1.Pod, path *field.Path) {
	for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
		if !strings.HasPrefix(k, AnnotationCDIPrefix) {
			continue
		}
		kp, n := path.Key(k), 0
		for _, d := range strings.Split(p.Annotations[k], ",") {
			if d = strings.TrimSpace(d); d == "" {
				continue
			}
			n++
			if _, _, _, err := parser.ParseQualifiedName(d); err != nil {
				v.add(kp, "%v: a CDI device is named vendor.com/class=name, or vendor.com/class=all", err)
			}
		}
		if n == 0 {
			v.add(kp, "names no device: give CDI device names (vendor.com/class=name), comma-separated")
		}
	}
}
