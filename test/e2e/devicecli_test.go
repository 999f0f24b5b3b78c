package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/metricstest"
)

// deviceCLISpec is a test vendor's CDI spec of two devices, whose edits
// set an environment variable only: what users see of them is tested
// here, not the devices themselves.
const deviceCLISpec = `cdiVersion: 0.6.0
kind: example.test/dev
devices:
- name: d0
  containerEdits:
    env: [EXAMPLE_DEV=d0]
- name: d1
  containerEdits:
    env: [EXAMPLE_DEV=d1]
`

// deviceCLIPods are a pod whose container asks for one device by its
// limits, and one whose annotation names the other.
const deviceCLIPods = `apiVersion: v1
kind: Pod
metadata:
  name: held
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "100000"]
    resources: {limits: {example.test/dev: 1}}
---
apiVersion: v1
kind: Pod
metadata:
  name: shared
  annotations: {cdi.k8s.io/share: example.test/dev=d1}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:test
    command: ["sleep", "100000"]
`

// TestDeviceCommands runs a pod holding a CDI device by its limits and
// one sharing another by its annotation, and reads them where users
// look: get devices (table, JSON, kinds completed), describe pod, the
// node's capacity and the staticlet_devices metric.
func TestDeviceCommands(t *testing.T) {
	e := harness.NewEnv(t)
	cdi := filepath.Join(t.TempDir(), "cdi")
	if err := os.MkdirAll(cdi, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(cdi, "example.yaml")
	if err := os.WriteFile(spec, []byte(deviceCLISpec), 0o644); err != nil {
		t.Fatal(err)
	}
	d := e.Start("--cdi-spec-dirs", cdi)
	e.Write("devices.yaml", deviceCLIPods)
	held, shared := "held-"+harness.TestNode, "shared-"+harness.TestNode
	d.WaitPod(held, 60*time.Second, "held running", harness.Running)
	d.WaitPod(shared, 60*time.Second, "shared running", harness.Running)

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "devices"}, []string{
			"KIND", "HELD BY",
			"example.test/dev   d0       " + spec, "allocated   default/" + held + "/main",
			"shared      default/" + shared + "/c",
		}},
		{[]string{"get", "devices", "example.test/dev", "-o", "json"}, []string{`"name": "example.test/dev=d0"`, `"exclusive": true`, `"resource": "cdi.k8s.io/share"`}},
		{[]string{"describe", "pod", held}, []string{"Devices:\n      example.test/dev:  example.test/dev=d0\n"}},
		{[]string{"describe", "pod", shared}, []string{"Devices:\n      cdi.k8s.io/share:  example.test/dev=d1\n"}},
		// The devices beside the machine's resources, and what the node
		// says of the machine.
		{[]string{"get", "node", "-o", "yaml"}, []string{"allocatable:\n    cpu: ", "capacity:\n    cpu: ", "\n    example.test/dev: \"2\"\n",
			"containerRuntimeVersion: containerd://", "kubernetes.io/hostname: " + harness.TestNode, "type: Hostname"}},
		{[]string{"describe", "node"}, []string{"  example.test/dev:   2\n", "System Info:\n", "  Container Runtime Version:  containerd://"}},
		{[]string{"__complete", "get", "devices", "--status-socket=" + d.Socket, "example"}, []string{"example.test/dev\n"}},
	} {
		cliWants(t, d, tt.args, tt.want)
	}

	socket := metricstest.SocketClient(d.Socket)
	samples, err := metricstest.Scrape(t.Context(), socket, "http://staticlet/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]float64{"free": 0, "allocated": 1, "shared": 1} {
		s, ok := metricstest.Find(samples, "staticlet_devices", "kind=example.test/dev", "state="+state)
		if !ok || s.Value != want {
			t.Errorf("staticlet_devices{state=%q} = %v (found %t), want %v", state, s.Value, ok, want)
		}
	}
}
