package pod

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestQOSClass(t *testing.T) {
	res := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	ctr := func(req, lim v1.ResourceList) v1.Container {
		return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	full := res("cpu", "1", "memory", "1Gi")
	tests := []struct {
		name  string
		inits []v1.Container
		apps  []v1.Container
		want  v1.PodQOSClass
	}{
		{"nothing set", nil, []v1.Container{ctr(nil, nil)}, v1.PodQOSBestEffort},
		{"only other resources", nil, []v1.Container{ctr(res("ephemeral-storage", "1Gi"), res("ephemeral-storage", "1Gi"))}, v1.PodQOSBestEffort},
		{"limits equal requests", nil, []v1.Container{ctr(full, full)}, v1.PodQOSGuaranteed},
		{"limits only", nil, []v1.Container{ctr(nil, full)}, v1.PodQOSGuaranteed},
		{"equal in another notation", nil, []v1.Container{ctr(res("cpu", "1000m", "memory", "1024Mi"), full)}, v1.PodQOSGuaranteed},
		{"requests below limits", nil, []v1.Container{ctr(res("cpu", "500m", "memory", "1Gi"), full)}, v1.PodQOSBurstable},
		{"requests only", nil, []v1.Container{ctr(full, nil)}, v1.PodQOSBurstable},
		{"cpu limit only", nil, []v1.Container{ctr(nil, res("cpu", "1"))}, v1.PodQOSBurstable},
		{"one container best effort", nil, []v1.Container{ctr(full, full), ctr(nil, nil)}, v1.PodQOSBurstable},
		{"init container counts", []v1.Container{ctr(res("cpu", "1"), nil)}, []v1.Container{ctr(nil, nil)}, v1.PodQOSBurstable},
		{"init container breaks guaranteed", []v1.Container{ctr(nil, nil)}, []v1.Container{ctr(full, full)}, v1.PodQOSBurstable},
		{"guaranteed with init", []v1.Container{ctr(full, full)}, []v1.Container{ctr(full, full)}, v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.PodSpec{InitContainers: tt.inits, Containers: tt.apps}
			if got := QOSClass(spec); got != tt.want {
				t.Errorf("QOSClass(%s) = %s, want %s", tt.name, got, tt.want)
			}
		})
	}
}

// TestQOSClassZeroQuantities: Kubernetes (GetPodQOS) ignores zero
// quantities, so a pod whose only request is cpu: 0 is BestEffort.
func TestQOSClassZeroQuantities(t *testing.T) {
	spec := &v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0")},
	}}}}
	if got := QOSClass(spec); got != v1.PodQOSBestEffort {
		t.Errorf("QOSClass(cpu request 0) = %s, want BestEffort", got)
	}
}

// TestCritical: a decoded pod is critical from the system-cluster-critical
// priority up, whether its manifest names a built-in class or a number.
func TestCritical(t *testing.T) {
	tests := []struct {
		name, spec string
		want       bool
	}{
		{"no priority", "", false},
		{"system-node-critical", "  priorityClassName: system-node-critical\n", true},
		{"system-cluster-critical", "  priorityClassName: system-cluster-critical\n", true},
		{"another class", "  priorityClassName: high\n", false},
		{"priority of the cluster-critical class", "  priority: 2000000000\n", true},
		{"priority just below", "  priority: 1999999999\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, err := Decode("/m/p.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"+tt.spec+"  containers:\n  - name: c\n    image: busybox\n"), testOpts)
			if err != nil {
				t.Fatal(err)
			}
			if got := Critical(&pods[0].Spec); got != tt.want {
				t.Errorf("Critical(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}
