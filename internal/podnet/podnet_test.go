package podnet

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// TestHostPorts: each hostPort goes to the pod's address of its hostIP's
// family, or to every address without a hostIP (or with an unspecified
// one); TCP is the default protocol; a port without a hostPort publishes
// nothing.
func TestHostPorts(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.1.0.5/24"), netip.MustParsePrefix("fd00::5/64")
	dual := []netip.Prefix{v4, v6}
	hp := func(proto, hostIP string, host uint16, podIP netip.Prefix, port uint16) netns.HostPort {
		var a netip.Addr
		if hostIP != "" {
			a = netip.MustParseAddr(hostIP)
		}
		return netns.HostPort{Protocol: proto, HostIP: a, HostPort: host, PodIP: podIP.Addr(), PodPort: port}
	}
	tests := []struct {
		name    string
		ports   []v1.ContainerPort
		addrs   []netip.Prefix
		want    []netns.HostPort
		wantErr string
	}{
		{"no hostPort", []v1.ContainerPort{{ContainerPort: 80}}, dual, nil, ""},
		{"every family", []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}, dual,
			[]netns.HostPort{hp("TCP", "", 8080, v4, 80), hp("TCP", "", 8080, v6, 80)}, ""},
		{"IPv4 hostIP", []v1.ContainerPort{{ContainerPort: 53, HostPort: 5353, HostIP: "192.0.2.1", Protocol: v1.ProtocolUDP}}, dual,
			[]netns.HostPort{hp("UDP", "192.0.2.1", 5353, v4, 53)}, ""},
		{"IPv6 hostIP", []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "2001:db8::1"}}, dual,
			[]netns.HostPort{hp("TCP", "2001:db8::1", 8080, v6, 80)}, ""},
		{"unspecified hostIP", []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "0.0.0.0"}}, []netip.Prefix{v4},
			[]netns.HostPort{hp("TCP", "", 8080, v4, 80)}, ""},
		{"hostIP of a family the pod lacks", []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "2001:db8::1"}}, []netip.Prefix{v4}, nil, ""},
		{"bad hostIP", []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "nope"}}, dual, nil, `container "c": hostIP "nope"`},
	}
	for _, tt := range tests {
		p := &pod.Pod{Pod: &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: tt.ports}}}}}
		got, err := hostPorts(p, tt.addrs)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: hostPorts error = %v, want one containing %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: hostPorts error = %v", tt.name, err)
		case !reflect.DeepEqual(got, tt.want):
			t.Errorf("%s: hostPorts = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestNilNetwork: a nil *Network is no network; its methods succeed.
func TestNilNetwork(t *testing.T) {
	var n *Network
	p := &pod.Pod{Pod: &v1.Pod{}}
	if addrs, err := n.SetUp("id", t.TempDir(), p); addrs != nil || err != nil {
		t.Errorf("SetUp on no network = %v, %v; want nothing", addrs, err)
	}
	if err := n.TearDown("id"); err != nil {
		t.Errorf("TearDown on no network = %v", err)
	}
	if owners, err := n.Owners(); owners != nil || err != nil {
		t.Errorf("Owners on no network = %v, %v; want none", owners, err)
	}
	if err := n.Release(""); err != nil {
		t.Errorf("Release on no network = %v", err)
	}
	if n, err := New(t.TempDir(), nil, nil); n != nil || err != nil {
		t.Errorf("New(nil config) = %v, %v; want no network", n, err)
	}
}
