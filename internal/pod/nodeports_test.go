package pod

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestNodePorts(t *testing.T) {
	host := "  hostNetwork: true\n"
	tests := []struct {
		name, spec, container string
		serves, reaches       []int
	}{
		{"nothing", "", "", nil, nil},
		{"containerPort with hostNetwork", host, "    ports: [{containerPort: 8080}]\n", []int{8080}, nil},
		{"containerPort in its own namespace", "", "    ports: [{containerPort: 8080}]\n", nil, nil},
		{"hostPort", "", "    ports: [{containerPort: 80, hostPort: 18080}]\n", []int{18080}, nil},
		{"probe ports, a named one too", host,
			"    ports: [{name: web, containerPort: 8080}]\n" +
				"    readinessProbe: {httpGet: {port: web}}\n" +
				"    livenessProbe: {tcpSocket: {port: 9090}}\n" +
				"    startupProbe: {grpc: {port: 9091}}\n",
			[]int{8080, 9090, 9091}, nil},
		{"probe ports in the pod's own namespace", "", "    readinessProbe: {tcpSocket: {port: 9090}}\n", nil, nil},
		{"a client flag names an address", host, "    command: [apiserver, --etcd-servers=https://127.0.0.1:2379, --secure-port=6443]\n",
			[]int{6443}, []int{2379}},
		{"a listening flag as two words", host, "    command: [server, --secure-port, '6443', --bind-address, '0.0.0.0:8443']\n",
			[]int{6443, 8443}, nil},
		{"listening on a port it also names", host,
			"    command: [etcd, --listen-client-urls=https://127.0.0.1:2379, --initial-cluster=a=https://10.0.0.1:2380, --listen-peer-urls=https://10.0.0.1:2380]\n",
			[]int{2379, 2380}, nil},
		{"a list of addresses", host, "    args: ['--servers=https://127.0.0.1:2379,https://[::1]:2479,http://localhost:2579/x']\n",
			nil, []int{2379, 2479, 2579}},
		{"a shell script", host, "    command: [sh, -c, \"until wget -q -O- http://127.0.0.1:8080/healthz; do sleep 1; done; exec app\"]\n",
			nil, []int{8080}},
		{"environment", host,
			"    env:\n    - {name: BACKEND, value: 'http://localhost:5432'}\n    - {name: LISTEN_ADDR, value: ':9000'}\n    - {name: METRICS_PORT, value: '9100'}\n",
			[]int{9000, 9100}, []int{5432}},
		{"exec probe and preStop hook", host,
			"    readinessProbe: {exec: {command: [sh, -c, 'nc -z 127.0.0.1 7000 && wget 127.0.0.1:7001']}}\n" +
				"    lifecycle: {preStop: {exec: {command: [curl, 'http://127.0.0.1:7002/drain']}}}\n",
			nil, []int{7001, 7002}},
		{"loopback from the pod's own namespace reaches itself", "", "    command: [app, --db=127.0.0.1:5432, --peer=192.168.1.10:7000]\n",
			nil, []int{7000}},
		{"host names say nothing", host, "    command: [app, --db=db.example:5432, --time=10:30, --ratio=1:2]\n", nil, nil},
		{"not addresses", host, "    command: [app, '--x=999.1.1.1:80', '--y=127.0.0.1:0', '--z=127.0.0.1:70000']\n", nil, nil},
		{"init containers count", host + "  initContainers:\n  - name: wait\n    image: busybox\n    command: [sh, -c, 'until nc -z 127.0.0.1:2379; do sleep 1; done']\n", "",
			nil, []int{2379}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := decodeOne(t, podWith(tt.spec, tt.container), Options{NodeName: "node-1"})
			got := p.NodePorts()
			if !slices.Equal(got.Serves, tt.serves) || !slices.Equal(got.Reaches, tt.reaches) {
				t.Errorf("NodePorts() = serves %v reaches %v, want serves %v reaches %v", got.Serves, got.Reaches, tt.serves, tt.reaches)
			}
		})
	}
}

// TestNodePortsKubeadm: kubeadm's control plane, as kubeadm writes it,
// says the kube-apiserver needs etcd, and nothing else needs anything:
// the controller-manager and the scheduler reach the apiserver through
// kubeconfig files.
func TestNodePortsKubeadm(t *testing.T) {
	names := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	np := map[string]NodePorts{}
	for _, n := range names {
		path := filepath.Join(corpusDir, "kubeadm129-zetaoss-"+n+".yaml")
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) && os.Getenv("CI") != "true" {
			t.Skipf("corpus %s not found", corpusDir)
		}
		if err != nil {
			t.Fatal(err)
		}
		pods, err := Decode(path, data, Options{NodeName: "node-1", Seen: time.Unix(0, 0)})
		if err != nil || len(pods) != 1 {
			t.Fatalf("Decode(%s) = %d pods, %v", path, len(pods), err)
		}
		np[n] = pods[0].NodePorts()
	}
	want := map[string]NodePorts{
		"etcd":                    {Serves: []int{2379, 2380, 2381}},
		"kube-apiserver":          {Serves: []int{6443}, Reaches: []int{2379}},
		"kube-controller-manager": {Serves: []int{10257}},
		"kube-scheduler":          {Serves: []int{10259}},
	}
	for _, n := range names {
		if !slices.Equal(np[n].Serves, want[n].Serves) || !slices.Equal(np[n].Reaches, want[n].Reaches) {
			t.Errorf("%s: NodePorts() = %+v, want %+v", n, np[n], want[n])
		}
	}
	for _, a := range names {
		for _, b := range names {
			if got, want := np[a].Needs(np[b]), a == "kube-apiserver" && b == "etcd"; got != want {
				t.Errorf("%s needs %s = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestStopNeedsLabel(t *testing.T) {
	for _, n := range []StopNeeds{
		{},
		{Ports: NodePorts{Serves: []int{2379, 2380}}},
		{Ports: NodePorts{Serves: []int{6443}, Reaches: []int{2379}}, After: []Key{{Namespace: "kube-system", Name: "etcd-n"}}},
		{After: []Key{{Namespace: "a", Name: "b"}, {Namespace: "c", Name: "d"}}},
	} {
		got, err := ParseStopNeeds(n.String())
		if err != nil || fmt.Sprint(got) != fmt.Sprint(n) {
			t.Errorf("ParseStopNeeds(%q) = %+v, %v; want %+v", n.String(), got, err, n)
		}
	}
	for _, bad := range []string{"serves=x", "reaches=0", "after=nons", "what=1", "serves=70000"} {
		if _, err := ParseStopNeeds(bad); err == nil {
			t.Errorf("ParseStopNeeds(%q) = nil error, want one", bad)
		}
	}
	api := StopNeeds{Ports: NodePorts{Serves: []int{6443}, Reaches: []int{2379}}}
	etcd := StopNeeds{Ports: NodePorts{Serves: []int{2379}}}
	ctrl := StopNeeds{After: []Key{{Namespace: "kube-system", Name: "api-n"}}}
	for _, tt := range []struct {
		n     StopNeeds
		other Key
		o     StopNeeds
		want  bool
	}{
		{api, Key{Namespace: "kube-system", Name: "etcd-n"}, etcd, true},
		{etcd, Key{Namespace: "kube-system", Name: "api-n"}, api, false},
		{ctrl, Key{Namespace: "kube-system", Name: "api-n"}, api, true},
		{ctrl, Key{Namespace: "default", Name: "api-n"}, api, false},
	} {
		if got := tt.n.Needs(tt.other, tt.o); got != tt.want {
			t.Errorf("%q.Needs(%s, %q) = %v, want %v", tt.n, tt.other, tt.o, got, tt.want)
		}
	}
}
