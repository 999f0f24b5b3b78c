package pod

import (
	"fmt"
	"slices"
	"testing"
)

const devicePod = `apiVersion: v1
kind: Pod
metadata:
  name: gpu
  annotations:
    cdi.k8s.io/b: "example.test/dev=all"
    cdi.k8s.io/a: "vendor.com/cam=front, vendor.com/cam=back"
spec:
  initContainers:
  - name: setup
    image: busybox
    resources:
      limits: {example.test/dev: 1}
  containers:
  - name: app
    image: busybox
    resources:
      limits: {nvidia.com/gpu: 2, cpu: 1, hugepages-2Mi: 4Mi, memory: 1Gi}
  - name: side
    image: busybox
`

func TestDeviceRequests(t *testing.T) {
	p := decodeOne(t, devicePod, testOpts)
	var got []string
	for _, r := range p.DeviceRequests() {
		got = append(got, fmt.Sprintf("%s %s %s %d", r.Container, r.Field, r.Kind, r.Count))
	}
	want := []string{
		"setup spec.initContainers[0].resources.limits[example.test/dev] example.test/dev 1",
		"app spec.containers[0].resources.limits[nvidia.com/gpu] nvidia.com/gpu 2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("DeviceRequests = %q\nwant %q", got, want)
	}
	var names []string
	for _, d := range p.CDIDevices() {
		names = append(names, d.Field+" "+d.Name)
	}
	wantNames := []string{
		"metadata.annotations[cdi.k8s.io/a] vendor.com/cam=front",
		"metadata.annotations[cdi.k8s.io/a] vendor.com/cam=back",
		"metadata.annotations[cdi.k8s.io/b] example.test/dev=all",
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("CDIDevices = %q\nwant %q", names, wantNames)
	}
	if k := DeviceKind("vendor.com/cam=front"); k != "vendor.com/cam" {
		t.Errorf("DeviceKind = %q", k)
	}
}

func TestValidateDevices(t *testing.T) {
	ann := func(v string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    cdi.k8s.io/x: '" + v + "'\nspec:\n  containers:\n  - name: web\n    image: nginx:1.27\n"
	}
	runValidateCases(t, []validateCase{
		{"CDI annotation", "containerd's CRI: parser.ParseQualifiedName", ann("example.test/dev=d0,example.test/dev=all"), nil},
		{"CDI annotation unqualified", "containerd's CRI: parser.ParseQualifiedName", ann("dev0"),
			[]string{`metadata.annotations[cdi.k8s.io/x]: unqualified device "dev0", missing vendor`}},
		{"CDI annotation bad class", "containerd's CRI: parser.ParseQualifiedName", ann("example.test/-x=d0"),
			[]string{`metadata.annotations[cdi.k8s.io/x]: invalid device "example.test/-x=d0"`}},
		{"CDI annotation empty", "staticlet's own", ann(" , "),
			[]string{"metadata.annotations[cdi.k8s.io/x]: names no device"}},
		{"fractional device count", "validateResourceRequirements: integer", podWith("", "    resources:\n      limits: {example.test/dev: 500m}\n"),
			[]string{"spec.containers[0].resources.limits[example.test/dev]: Invalid value: \"500m\": must be an integer"}},
		{"device request below limit", "validateResourceRequirements: not overcommittable", podWith("", "    resources:\n      limits: {example.test/dev: 2}\n      requests: {example.test/dev: 1}\n"),
			[]string{"spec.containers[0].resources.requests[example.test/dev]: Invalid value: \"1\": must be equal to example.test/dev limit of 2"}},
		{"device request without limit", "validateResourceRequirements: not overcommittable", podWith("", "    resources:\n      requests: {example.test/dev: 1}\n"),
			[]string{"spec.containers[0].resources.limits[example.test/dev]: Required value"}},
	})
}
