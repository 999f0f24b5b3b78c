package status

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// devicePod is a pod whose containers hold devices: container name ->
// resource name -> device names.
func devicePod(ns, name string, init, app map[string]map[string][]string) v1.Pod {
	statuses := func(m map[string]map[string][]string) []v1.ContainerStatus {
		var out []v1.ContainerStatus
		for c, byResource := range m {
			cs := v1.ContainerStatus{Name: c}
			for res, devs := range byResource {
				rs := v1.ResourceStatus{Name: v1.ResourceName(res)}
				for _, d := range devs {
					rs.Resources = append(rs.Resources, v1.ResourceHealth{ResourceID: v1.ResourceID(d), Health: v1.ResourceHealthStatusHealthy})
				}
				cs.AllocatedResourcesStatus = append(cs.AllocatedResourcesStatus, rs)
			}
			out = append(out, cs)
		}
		return out
	}
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status:     v1.PodStatus{InitContainerStatuses: statuses(init), ContainerStatuses: statuses(app)},
	}
}

// annotated is pod default/ann with annotations and container statuses.
func annotated(annotations map[string]string, statuses ...v1.ContainerStatus) v1.Pod {
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ann", Annotations: annotations},
		Status:     v1.PodStatus{ContainerStatuses: statuses},
	}
}

// initDonePod is pod default/init: its init container setup, done, held
// example.test/dev=0 and =1, and its main container took =0; its sidecar
// (exited, to be restarted) holds example.test/cam=a.
func initDonePod() v1.Pod {
	p := devicePod("default", "init", map[string]map[string][]string{
		"setup":   {"example.test/dev": {"example.test/dev=0", "example.test/dev=1"}},
		"sidecar": {"example.test/cam": {"example.test/cam=a"}},
	}, map[string]map[string][]string{"main": {"example.test/dev": {"example.test/dev=0"}}})
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []v1.Container{{Name: "setup"}, {Name: "sidecar", RestartPolicy: &always}}
	for i := range p.Status.InitContainerStatuses {
		p.Status.InitContainerStatuses[i].State.Terminated = &v1.ContainerStateTerminated{}
	}
	return p
}

func TestHeldDevices(t *testing.T) {
	const spec = "/etc/cdi/test.yaml"
	node := []Device{
		{Name: "example.test/dev=0", Kind: "example.test/dev", Spec: spec},
		{Name: "example.test/dev=1", Kind: "example.test/dev", Spec: spec},
		{Name: "example.test/cam=a", Kind: "example.test/cam", Spec: spec},
	}
	tests := []struct {
		name   string
		pods   []v1.Pod
		want   map[string][]DeviceHolder // by device, devices not named hold nothing
		states []string                  // of each device, in order
		extra  []string                  // devices no spec names, after the others
	}{{
		name:   "no pods: all free",
		states: []string{DeviceFree, DeviceFree, DeviceFree},
	}, {
		name: "limits hold alone, in init containers too",
		pods: []v1.Pod{
			devicePod("default", "b", nil, map[string]map[string][]string{"main": {"example.test/dev": {"example.test/dev=1"}}}),
			devicePod("default", "a", map[string]map[string][]string{"setup": {"example.test/dev": {"example.test/dev=0"}}}, nil),
		},
		want: map[string][]DeviceHolder{
			"example.test/dev=0": {{Pod: "default/a", Container: "setup", Resource: "example.test/dev", Exclusive: true}},
			"example.test/dev=1": {{Pod: "default/b", Container: "main", Resource: "example.test/dev", Exclusive: true}},
		},
		states: []string{DeviceAllocated, DeviceAllocated, DeviceFree},
	}, {
		name: "an init container done holds only what no later container took",
		pods: []v1.Pod{initDonePod()},
		want: map[string][]DeviceHolder{
			"example.test/dev=0": {{Pod: "default/init", Container: "main", Resource: "example.test/dev", Exclusive: true}},
			"example.test/dev=1": {{Pod: "default/init", Container: "setup", Resource: "example.test/dev", Exclusive: true}},
			"example.test/cam=a": {{Pod: "default/init", Container: "sidecar", Resource: "example.test/cam", Exclusive: true}},
		},
		states: []string{DeviceAllocated, DeviceAllocated, DeviceAllocated},
	}, {
		name: "an annotation shares with every container, beside a limit",
		pods: []v1.Pod{
			devicePod("kube-system", "cam", nil, map[string]map[string][]string{
				"x": {"cdi.k8s.io/cam": {"example.test/cam=a"}},
				"y": {"cdi.k8s.io/cam": {"example.test/cam=a"}, "example.test/dev": {"example.test/dev=0"}},
			}),
			devicePod("default", "other", nil, map[string]map[string][]string{"z": {"cdi.k8s.io/all": {"example.test/dev=0", "example.test/dev=1"}}}),
		},
		want: map[string][]DeviceHolder{
			"example.test/cam=a": {
				{Pod: "kube-system/cam", Container: "x", Resource: "cdi.k8s.io/cam"},
				{Pod: "kube-system/cam", Container: "y", Resource: "cdi.k8s.io/cam"},
			},
			"example.test/dev=0": {
				{Pod: "default/other", Container: "z", Resource: "cdi.k8s.io/all"},
				{Pod: "kube-system/cam", Container: "y", Resource: "example.test/dev", Exclusive: true},
			},
			"example.test/dev=1": {{Pod: "default/other", Container: "z", Resource: "cdi.k8s.io/all"}},
		},
		states: []string{DeviceAllocated, DeviceShared, DeviceShared},
	}, {
		name: "annotations name devices for every container made",
		pods: []v1.Pod{annotated(map[string]string{
			"cdi.k8s.io/cam":   "example.test/cam=a",
			"cdi.k8s.io/all":   "example.test/dev=all",
			"other.io/ignored": "example.test/dev=1",
		}, v1.ContainerStatus{Name: "made", ContainerID: "containerd://1"}, v1.ContainerStatus{Name: "not-yet"},
			// A status that names an annotation's devices itself is
			// taken at its word.
			v1.ContainerStatus{Name: "reported", ContainerID: "containerd://2", AllocatedResourcesStatus: []v1.ResourceStatus{
				{Name: "cdi.k8s.io/all", Resources: []v1.ResourceHealth{{ResourceID: "example.test/dev=1"}}},
			}},
		)},
		want: map[string][]DeviceHolder{
			"example.test/cam=a": {
				{Pod: "default/ann", Container: "made", Resource: "cdi.k8s.io/cam"},
				{Pod: "default/ann", Container: "reported", Resource: "cdi.k8s.io/cam"},
			},
			"example.test/dev=0": {{Pod: "default/ann", Container: "made", Resource: "cdi.k8s.io/all"}},
			"example.test/dev=1": {
				{Pod: "default/ann", Container: "made", Resource: "cdi.k8s.io/all"},
				{Pod: "default/ann", Container: "reported", Resource: "cdi.k8s.io/all"},
			},
		},
		states: []string{DeviceShared, DeviceShared, DeviceShared},
	}, {
		name: "a device whose spec went is still listed while held",
		pods: []v1.Pod{
			devicePod("default", "a", nil, map[string]map[string][]string{"main": {"gone.test/x": {"gone.test/x=9", "gone.test/x=1"}}}),
		},
		want: map[string][]DeviceHolder{
			"gone.test/x=1": {{Pod: "default/a", Container: "main", Resource: "gone.test/x", Exclusive: true}},
			"gone.test/x=9": {{Pod: "default/a", Container: "main", Resource: "gone.test/x", Exclusive: true}},
		},
		states: []string{DeviceFree, DeviceFree, DeviceFree, DeviceAllocated, DeviceAllocated},
		extra:  []string{"gone.test/x=1", "gone.test/x=9"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HeldDevices(node, tt.pods)
			if len(got) != len(node)+len(tt.extra) {
				t.Fatalf("HeldDevices() = %+v, want %d devices", got, len(node)+len(tt.extra))
			}
			for i, d := range got {
				if i < len(node) && (d.Name != node[i].Name || d.Spec != spec) {
					t.Errorf("device %d = %+v, want %s of %s in its place", i, d, node[i].Name, spec)
				}
				if i >= len(node) && (d.Name != tt.extra[i-len(node)] || d.Spec != "" || d.Kind != "gone.test/x") {
					t.Errorf("device %d = %+v, want %s of kind gone.test/x with no spec", i, d, tt.extra[i-len(node)])
				}
				if !reflect.DeepEqual(d.HeldBy, tt.want[d.Name]) {
					t.Errorf("%s held by %+v, want %+v", d.Name, d.HeldBy, tt.want[d.Name])
				}
				if d.State != tt.states[i] {
					t.Errorf("%s State = %s, want %s", d.Name, d.State, tt.states[i])
				}
			}
		})
	}
	if node[0].HeldBy != nil {
		t.Errorf("HeldDevices changed its argument: %+v", node[0])
	}
}

func TestServerDevices(t *testing.T) {
	store := NewStore()
	p := devicePod("default", "gpu-node1", nil, map[string]map[string][]string{"main": {"example.test/dev": {"example.test/dev=1"}}})
	store.SetPod(&p)
	ctx := context.Background()

	c := startServer(t, ServerConfig{Store: store})
	list, err := c.Devices(ctx)
	if err != nil {
		t.Fatalf("Devices() with no lister: %v", err)
	}
	if list.SpecDirs == nil || len(list.Devices) != 1 || list.Devices[0].Spec != "" {
		t.Errorf("Devices() with no lister = %+v, want only the held device, with no spec", list)
	}

	lister := func() DeviceList {
		return DeviceList{SpecDirs: []string{"/etc/cdi", "/var/run/cdi"}, Devices: []Device{
			{Name: "example.test/dev=0", Kind: "example.test/dev", Spec: "/etc/cdi/t.yaml"},
			{Name: "example.test/dev=1", Kind: "example.test/dev", Spec: "/etc/cdi/t.yaml"},
		}}
	}
	c = startServer(t, ServerConfig{Store: store, Devices: lister})
	list, err = c.Devices(ctx)
	if err != nil {
		t.Fatalf("Devices(): %v", err)
	}
	want := []DeviceHolder{{Pod: "default/gpu-node1", Container: "main", Resource: "example.test/dev", Exclusive: true}}
	if len(list.SpecDirs) != 2 || len(list.Devices) != 2 || list.Devices[0].HeldBy != nil || !reflect.DeepEqual(list.Devices[1].HeldBy, want) {
		t.Errorf("Devices() = %+v, want dev=1 held by %+v", list, want)
	}

	// The node counts them as an extended resource, as the kubelet does
	// a device plugin's.
	n, err := c.Node(ctx)
	if err != nil {
		t.Fatalf("Node(): %v", err)
	}
	for _, rl := range []v1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if q := rl["example.test/dev"]; len(rl) != 1 || q.Value() != 2 {
			t.Errorf("Node() capacity or allocatable = %v, want example.test/dev: 2", rl)
		}
	}
}
