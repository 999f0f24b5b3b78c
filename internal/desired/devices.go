package desired

import (
	"fmt"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// DeviceCatalog knows the node's CDI devices (package devices): the
// kinds (vendor.com/class) and devices (vendor.com/class=name) its CDI
// specs define.
type DeviceCatalog interface {
	KnownKind(kind string) bool
	KnownDevice(name string) bool
	// Devices lists the devices of kind that can be handed out one by
	// one.
	Devices(kind string) []string
}

// DeviceError refuses a pod that asks for a device kind or a device no
// CDI spec of the node defines: it could never start. It is re-checked
// whenever the specs change.
type DeviceError struct {
	Pod   pod.Key
	Field string // where the pod asks for it
	Name  string // the kind or the device
	Kind  bool   // Name is a kind
	// Asked and Have are set when the kind is known but has fewer
	// devices than a container asks for.
	Asked, Have int64
}

func (e *DeviceError) Error() string {
	if e.Asked > 0 {
		return fmt.Sprintf("%s: asks for %d devices of kind %s, and the node's CDI specs define %d; pod %s is not run", e.Field, e.Asked, e.Name, e.Have, e.Pod)
	}
	what := "device " + e.Name
	if e.Kind {
		what = "device kind " + e.Name
	}
	return fmt.Sprintf("%s: no CDI spec on this node defines %s; pod %s is not run", e.Field, what, e.Pod)
}

// unknownDevices returns the first request of p that devices cannot
// meet, or nil.
func unknownDevices(p *pod.Pod, devices DeviceCatalog) *DeviceError {
	for _, r := range p.DeviceRequests() {
		if !devices.KnownKind(r.Kind) {
			return &DeviceError{Pod: p.Key(), Field: r.Field, Name: r.Kind, Kind: true}
		}
		if have := int64(len(devices.Devices(r.Kind))); r.Count > have {
			return &DeviceError{Pod: p.Key(), Field: r.Field, Name: r.Kind, Kind: true, Asked: r.Count, Have: have}
		}
	}
	for _, d := range p.CDIDevices() {
		kind, all := pod.DeviceKind(d.Name), d.Name == pod.DeviceKind(d.Name)+"=all"
		switch {
		case all && !devices.KnownKind(kind):
			return &DeviceError{Pod: p.Key(), Field: d.Field, Name: kind, Kind: true}
		case !all && !devices.KnownDevice(d.Name):
			return &DeviceError{Pod: p.Key(), Field: d.Field, Name: d.Name}
		}
	}
	return nil
}

// refuseUnknownDevices takes out of pods those that ask for devices the
// node lacks, and gives the files that define them a DeviceError. A pod
// that passed before (its config hash in before), unchanged, stays
// though, its file showing the error: a spec removed, or being
// rewritten, stops no running pod, as a bad edit of its file does not.
// It returns the config hashes of the pods it let through. With no
// catalog every pod stays.
func refuseUnknownDevices(pods []*pod.Pod, files []watch.FileResult, devices DeviceCatalog, before map[pod.Key]string) ([]*pod.Pod, []watch.FileResult, map[pod.Key]string) {
	if devices == nil {
		return pods, files, nil
	}
	refused, kept := map[pod.Key]error{}, map[pod.Key]error{}
	passed := map[pod.Key]string{}
	for _, p := range pods {
		hash := p.Annotations[pod.AnnotationHash]
		if e := unknownDevices(p, devices); e != nil {
			if h, ok := before[p.Key()]; !ok || h != hash {
				refused[p.Key()] = e
				continue
			}
			kept[p.Key()] = e
		}
		passed[p.Key()] = hash
	}
	pods, files = refusePods(pods, files, refused)
	return pods, flagPods(files, kept), passed
}
