package cli

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/status"
)

// devicesDaemon serves, on a socket in a temporary directory, a node
// with the CDI devices devs in the spec directories dirs, and, if held,
// a pod one of whose containers holds example.test/dev=1 by its limits;
// it returns the socket's path.
func devicesDaemon(t *testing.T, dirs []string, devs []status.Device, held bool) string {
	t.Helper()
	store := status.NewStore()
	if held {
		store.SetPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-n1"},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "main", AllocatedResourcesStatus: []v1.ResourceStatus{{
				Name:      "example.test/dev",
				Resources: []v1.ResourceHealth{{ResourceID: "example.test/dev=1", Health: v1.ResourceHealthStatusHealthy}},
			}}}}},
		})
	}
	lister := func() status.DeviceList { return status.DeviceList{SpecDirs: dirs, Devices: devs} }
	return serveStatus(t, status.ServerConfig{Store: store, Devices: lister})
}

func TestGetDevices(t *testing.T) {
	dirs := []string{"/etc/cdi", "/var/run/cdi"}
	socket := devicesDaemon(t, dirs, []status.Device{
		{Name: "example.test/dev=0", Kind: "example.test/dev", Spec: "/etc/cdi/test.yaml"},
		{Name: "example.test/dev=1", Kind: "example.test/dev", Spec: "/etc/cdi/test.yaml"},
		{Name: "other.test/cam=a", Kind: "other.test/cam", Spec: "/var/run/cdi/cam.json"},
	}, true)
	empty := devicesDaemon(t, dirs, nil, false)
	tests := []struct {
		args      []string
		socket    string
		code      int
		want, not []string
	}{
		{args: []string{"get", "devices"}, want: []string{"KIND", "HELD BY", "/etc/cdi/test.yaml", "allocated", "default/gpu-n1/main", "other.test/cam", "free"}},
		{args: []string{"get", "device", "other.test/cam"}, want: []string{"other.test/cam", "/var/run/cdi/cam.json"}, not: []string{"example.test/dev"}},
		{args: []string{"get", "devices", "-o", "json"}, want: []string{`"specDirs"`, `"name": "example.test/dev=1"`, `"container": "main"`, `"exclusive": true`, `"state": "allocated"`, `"state": "free"`}},
		{args: []string{"get", "devices", "-o", "yaml"}, want: []string{"kind: other.test/cam", "pod: default/gpu-n1"}},
		{args: []string{"get", "devices", "-o", "wide"}, code: 1, want: []string{`unable to match a printer suitable for the output format "wide", allowed formats are: custom-columns,`}},
		{args: []string{"get", "devices"}, socket: empty, want: []string{"No CDI devices: no CDI spec in /etc/cdi, /var/run/cdi names one."}, not: []string{"KIND"}},
		{args: []string{"get", "devices", "none.test/x"}, want: []string{"No none.test/x devices"}},
		{args: []string{"__complete", "get", "devices", ""}, want: []string{"example.test/dev\nother.test/cam\n"}},
		{args: []string{"__complete", "get", "devices", "oth"}, want: []string{"other.test/cam"}, not: []string{"example.test/dev"}},
		{args: []string{"__complete", "get", "devices", "example.test/dev", ""}, not: []string{"other.test/cam"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			s := tt.socket
			if s == "" {
				s = socket
			}
			args := append(tt.args[:len(tt.args):len(tt.args)], "--status-socket="+s)
			if tt.args[0] == "__complete" {
				// The word being completed stays last.
				n := len(tt.args)
				args = append(append(tt.args[:n-1:n-1], "--status-socket="+s), tt.args[n-1])
			}
			out, code := runCLI(t, args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tt.code, out)
			}
			checkOutput(t, out, tt.want, tt.not)
		})
	}
}
