package printers

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/status"
)

func TestDevices(t *testing.T) {
	const spec = "/etc/cdi/test.yaml"
	var b bytes.Buffer
	err := Devices(&b, []status.Device{
		{Name: "example.test/dev=0", Kind: "example.test/dev", Spec: spec, State: status.DeviceAllocated, HeldBy: []status.DeviceHolder{
			{Pod: "default/a-node1", Container: "main", Resource: "example.test/dev", Exclusive: true},
			{Pod: "default/cam-node1", Container: "x", Resource: "cdi.k8s.io/all"},
		}},
		{Name: "example.test/dev=1", Kind: "example.test/dev", Spec: spec, State: status.DeviceFree},
		{Name: "example.test/cam=a", Kind: "example.test/cam", Spec: spec, State: status.DeviceShared, HeldBy: []status.DeviceHolder{
			{Pod: "default/cam-node1", Container: "x", Resource: "cdi.k8s.io/cam"},
			{Pod: "default/cam-node1", Container: "y", Resource: "cdi.k8s.io/cam"},
		}},
		{Name: "gone.test/x=9", Kind: "gone.test/x", State: status.DeviceAllocated, HeldBy: []status.DeviceHolder{
			{Pod: "kube-system/old-node1", Container: "c", Resource: "gone.test/x", Exclusive: true},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `KIND               DEVICE   SPEC                 STATE       HELD BY
example.test/dev   0        /etc/cdi/test.yaml   allocated   default/a-node1/main, default/cam-node1/x (shared)
example.test/dev   1        /etc/cdi/test.yaml   free        <none>
example.test/cam   a        /etc/cdi/test.yaml   shared      default/cam-node1/x, default/cam-node1/y
gone.test/x        9        <none>               allocated   kube-system/old-node1/c
`
	if b.String() != want {
		t.Errorf("Devices() =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	Devices(&b, nil)
	if b.String() != "KIND   DEVICE   SPEC   STATE   HELD BY\n" {
		t.Errorf("Devices(none) = %q, want the header alone", b.String())
	}
}

// TestDescribePodDevices: describe lists under each container the
// devices it holds, by the resource it holds them by, those of the pod's
// CDI annotations for every container made, and nothing for a container
// holding none.
func TestDescribePodDevices(t *testing.T) {
	health := func(id string, h v1.ResourceHealthStatus) v1.ResourceHealth {
		return v1.ResourceHealth{ResourceID: v1.ResourceID(id), Health: h}
	}
	one := resource.MustParse("1")
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-node1", Annotations: map[string]string{
			"cdi.k8s.io/cam": "example.test/cam=a,example.test/cam=b",
			"cdi.k8s.io/usb": "vendor.test/usb=all",
		}},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "infer", Image: "app:1", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"example.test/dev": one}}},
			{Name: "plain", Image: "app:1"},
			{Name: "waiting", Image: "app:1"},
		}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			{Name: "infer", ContainerID: "containerd://1", AllocatedResourcesStatus: []v1.ResourceStatus{
				{Name: "example.test/dev", Resources: []v1.ResourceHealth{health("example.test/dev=1", v1.ResourceHealthStatusUnknown)}},
				{Name: "cdi.k8s.io/cam", Resources: []v1.ResourceHealth{
					health("example.test/cam=a", v1.ResourceHealthStatusHealthy), health("example.test/cam=b", v1.ResourceHealthStatusUnhealthy)}},
			}},
			{Name: "plain", ContainerID: "containerd://2"},
			{Name: "waiting"},
		}},
	}
	var b bytes.Buffer
	if err := DescribePod(&b, p, nil, now); err != nil {
		t.Fatal(err)
	}
	out := regexp.MustCompile(` +`).ReplaceAllString(b.String(), " ")
	for _, want := range []string{
		// The status' devices; then an annotation it does not name.
		"Limits:\n example.test/dev: 1\n Devices:\n example.test/dev: example.test/dev=1\n" +
			" cdi.k8s.io/cam: example.test/cam=a, example.test/cam=b (Unhealthy)\n cdi.k8s.io/usb: vendor.test/usb=all\n",
		// A container made gets the annotations' devices.
		"plain:\n Container ID: containerd://2\n Image: app:1\n Image ID: \n Port: <none>\n Host Port: <none>\n" +
			" State: Waiting\n Ready: False\n Restart Count: 0\n" +
			" Devices:\n cdi.k8s.io/cam: example.test/cam=a, example.test/cam=b\n cdi.k8s.io/usb: vendor.test/usb=all\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DescribePod() lacks %q; got:\n%s", want, b.String())
		}
	}
	if n := strings.Count(out, "Devices:"); n != 2 {
		t.Errorf("DescribePod() has %d Devices: lines, want 2 (none for a container not made):\n%s", n, b.String())
	}
}
