package spec

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResolveEnv(t *testing.T) {
	p := decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: ns1
  labels: {tier: front}
  annotations: {owner: ops}
spec:
  hostNetwork: true
  serviceAccountName: robot
  containers:
  - name: c
    image: busybox
    command: ["echo", "$(POD)", "$$(POD)", "$(NOPE)"]
    args: ["$(GREETING)"]
    resources:
      limits: {memory: 64Mi}
      requests: {cpu: 250m}
    env:
    - name: POD
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: NS
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: SA
      valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}
    - name: HOST_IP
      valueFrom: {fieldRef: {fieldPath: status.hostIP}}
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: TIER
      valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}
    - name: OWNER
      valueFrom: {fieldRef: {fieldPath: "metadata.annotations['owner']"}}
    - name: MEM_MI
      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
    - name: CPU_LIMIT
      valueFrom: {resourceFieldRef: {resource: limits.cpu}}
    - name: CPU_REQ_M
      valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}
    - name: GREETING
      value: "hello $(POD) in $(NS), $$(NS) $(LATER)"
    - name: LATER
      value: x
`)
	node := NodeFacts{HostIPs: []string{"192.0.2.7"}, CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")}
	vars, vals, err := resolveEnv(p, &p.Spec.Containers[0], node)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"POD": p.Name, "NS": "ns1", "UID": string(p.UID), "NODE": "n", "SA": "robot",
		"HOST_IP": "192.0.2.7", "POD_IP": "192.0.2.7", "TIER": "front", "OWNER": "ops",
		"MEM_MI": "64", "CPU_LIMIT": "2", "CPU_REQ_M": "250",
		"GREETING": "hello " + p.Name + " in ns1, $(NS) $(LATER)", "LATER": "x",
	}
	for name, w := range want {
		if got := vals[name]; got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
	if len(vars) != len(p.Spec.Containers[0].Env) || vars[0].Name != "POD" {
		t.Errorf("resolveEnv lost the order: %v", vars)
	}
	s, err := Container(p, &p.Spec.Containers[0], ContainerOptions{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"echo", p.Name, "$(POD)", "$(NOPE)", "hello " + p.Name + " in ns1, $(NS) $(LATER)"}
	if !slices.Equal(s.Process.Args, wantArgs) {
		t.Errorf("args = %q, want %q", s.Process.Args, wantArgs)
	}
	if !slices.Contains(s.Process.Env, "TIER=front") {
		t.Errorf("env %q lacks TIER=front", s.Process.Env)
	}
}

func TestResolveEnvErrors(t *testing.T) {
	p := decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: busybox
    env:
    - name: X
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
`)
	// Validation refuses such a field; resolveEnv must not trust it did.
	p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath = "status.phase"
	if _, _, err := resolveEnv(p, &p.Spec.Containers[0], NodeFacts{}); err == nil {
		t.Error("resolveEnv accepted an unsupported field")
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "two"}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x$(A)y$(B)z", "x1ytwoz"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$(A", "$(A"},
		{"cost $5", "cost $5"},
		{"end$", "end$"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, vals); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPodIPEnv(t *testing.T) {
	p := decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: busybox
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: POD_IPS
      valueFrom: {fieldRef: {fieldPath: status.podIPs}}
`)
	tests := []struct {
		name        string
		hostNetwork bool
		node        NodeFacts
		ip, ips     string
	}{
		{"pod network, dual stack", false, NodeFacts{HostIPs: []string{"192.0.2.7"}, PodIPs: []string{"10.213.0.2", "fd00:213::2"}}, "10.213.0.2", "10.213.0.2,fd00:213::2"},
		{"no pod network", false, NodeFacts{HostIPs: []string{"192.0.2.7"}}, "", ""},
		{"host network", true, NodeFacts{HostIPs: []string{"192.0.2.7"}, PodIPs: []string{"10.213.0.2"}}, "192.0.2.7", "192.0.2.7"},
		{"host network, dual stack", true, NodeFacts{HostIPs: []string{"2001:db8::7", "192.0.2.7"}}, "2001:db8::7", "2001:db8::7,192.0.2.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Spec.HostNetwork = tt.hostNetwork
			_, vals, err := resolveEnv(p, &p.Spec.Containers[0], tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if vals["POD_IP"] != tt.ip || vals["POD_IPS"] != tt.ips {
				t.Errorf("POD_IP, POD_IPS = %q, %q; want %q, %q", vals["POD_IP"], vals["POD_IPS"], tt.ip, tt.ips)
			}
		})
	}
}
