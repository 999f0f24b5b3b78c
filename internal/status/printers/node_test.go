package printers

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeStatus(t *testing.T) {
	cond := func(typ v1.NodeConditionType, s v1.ConditionStatus) v1.NodeCondition {
		return v1.NodeCondition{Type: typ, Status: s}
	}
	for _, tc := range []struct {
		name  string
		conds []v1.NodeCondition
		want  string
	}{
		{"none", nil, "Unknown"},
		{"ready", []v1.NodeCondition{cond(v1.NodeDiskPressure, v1.ConditionFalse), cond(v1.NodeReady, v1.ConditionTrue)}, "Ready"},
		{"starting", []v1.NodeCondition{cond(v1.NodeReady, v1.ConditionFalse)}, "NotReady"},
		{"disk pressure", []v1.NodeCondition{cond(v1.NodeDiskPressure, v1.ConditionTrue), cond(v1.NodeReady, v1.ConditionTrue)}, "Ready,DiskPressure"},
	} {
		n := &v1.Node{Status: v1.NodeStatus{Conditions: tc.conds}}
		if got := nodeStatus(n); got != tc.want {
			t.Errorf("%s: nodeStatus() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDescribeNode(t *testing.T) {
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(start),
			Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": "n1"}},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}, {Type: v1.NodeHostName, Address: "n1"}},
			NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.2.3", ContainerRuntimeVersion: "containerd://2.1.4",
				OSImage: "Debian GNU/Linux 13 (trixie)", Architecture: "amd64"},
			Capacity:    v1.ResourceList{"example.test/dev": resource.MustParse("2")},
			Allocatable: v1.ResourceList{"example.test/dev": resource.MustParse("2")},
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "/r: nodefs.available 0% < 10%"},
				{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"},
			},
		},
	}
	var b bytes.Buffer
	if err := DescribeNode(&b, n, start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:", "n1", "Conditions:", "DiskPressure", "KubeletHasDiskPressure", "/r: nodefs.available 0% < 10%", "v1.2.3",
		"Capacity:\n  example.test/dev:  2\nAllocatable:\n  example.test/dev:  2\n",
		"Labels:             kubernetes.io/hostname=n1\n                    kubernetes.io/os=linux\n",
		"Addresses:\n  InternalIP:  192.0.2.7\n  Hostname:    n1\n",
		"  Container Runtime Version:  containerd://2.1.4\n", "  OS Image:                   Debian GNU/Linux 13 (trixie)\n",
		"  Kubelet Version:            v1.2.3\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("DescribeNode() lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := Node(&b, n, start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "n1     Ready,DiskPressure   60m   v1.2.3") {
		t.Errorf("Node() =\n%s", b.String())
	}
}
