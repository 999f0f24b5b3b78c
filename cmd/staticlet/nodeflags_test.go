package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestParseNodeLabels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []string
		want    map[string]string
		wantErr string // in the error, besides the flag and the item
	}{
		{name: "none", want: map[string]string{}},
		{name: "plain", in: []string{"tier=edge", "example.com/rack=r1"}, want: map[string]string{"tier": "edge", "example.com/rack": "r1"}},
		{name: "blanks trimmed, empty items skipped", in: []string{" tier = edge ", ""}, want: map[string]string{"tier": "edge"}},
		{name: "a key alone has the empty value", in: []string{"gpu"}, want: map[string]string{"gpu": ""}},
		{name: "empty value", in: []string{"gpu="}, want: map[string]string{"gpu": ""}},
		{name: "a later key wins", in: []string{"tier=a", "tier=b"}, want: map[string]string{"tier": "b"}},
		{name: "the kubelet's own labels", in: []string{"kubernetes.io/hostname=h", "topology.kubernetes.io/zone=z", "node.kubernetes.io/instance-type=m"},
			want: map[string]string{"kubernetes.io/hostname": "h", "topology.kubernetes.io/zone": "z", "node.kubernetes.io/instance-type": "m"}},
		{name: "node.kubernetes.io and kubelet.kubernetes.io", in: []string{"node.kubernetes.io/pool=a", "x.kubelet.kubernetes.io/y=b"},
			want: map[string]string{"node.kubernetes.io/pool": "a", "x.kubelet.kubernetes.io/y": "b"}},
		{name: "node-role refused", in: []string{"node-role.kubernetes.io/control-plane="}, wantErr: `may not set "node-role.kubernetes.io/control-plane"`},
		{name: "kubernetes.io refused", in: []string{"kubernetes.io/role=x"}, wantErr: `may not set "kubernetes.io/role"`},
		{name: "k8s.io refused", in: []string{"k8s.io/x=y"}, wantErr: `may not set "k8s.io/x"`},
		{name: "k8s.io subdomain refused", in: []string{"a.k8s.io/x=y"}, wantErr: `may not set "a.k8s.io/x"`},
		{name: "bad key", in: []string{"-tier=edge"}, wantErr: `key "-tier"`},
		{name: "empty key", in: []string{"=edge"}, wantErr: `key ""`},
		{name: "bad prefix", in: []string{"Example_com/x=y"}, wantErr: `key "Example_com/x"`},
		{name: "bad value", in: []string{"tier=a b"}, wantErr: `value "a b"`},
		{name: "long value", in: []string{"tier=" + strings.Repeat("a", 64)}, wantErr: "must be no more than 63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNodeLabels(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--node-labels") ||
					!strings.Contains(err.Error(), tc.in[0]) {
					t.Errorf("parseNodeLabels(%q) = %v, %v; want an error naming --node-labels and the label, with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Errorf("parseNodeLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestNodeAddressesFlag: a bad --node-ip is an error naming the flag and
// its value; an address the host lacks, or the kubelet refuses, too.
func TestNodeAddressesFlag(t *testing.T) {
	for _, in := range []string{"node1", "192.0.2.7,192.0.2.8", "0.0.0.0,::", "127.0.0.1", "192.0.2.254", "fe80::1", "ff02::1"} {
		got, err := nodeAddresses(in, "staticlet0")
		if err == nil || !strings.Contains(err.Error(), "--node-ip") || !strings.Contains(err.Error(), in) {
			t.Errorf("nodeAddresses(%q) = %v, %v; want an error naming --node-ip and %q", in, got, err, in)
		}
	}
	// None given, or 0.0.0.0: the default route's, as before --node-ip.
	def, err := nodeAddresses("", "staticlet0")
	if err != nil {
		t.Fatal(err)
	}
	unspec, err := nodeAddresses("0.0.0.0", "staticlet0")
	if err != nil || !slices.Equal(def, unspec) {
		t.Errorf("nodeAddresses(0.0.0.0) = %v, %v; want the default %v", unspec, err, def)
	}
	// An address of this host is taken as it is.
	if len(def) > 0 {
		got, err := nodeAddresses(def[0], "staticlet0")
		if err != nil || len(got) != 1 || got[0] != def[0] {
			t.Errorf("nodeAddresses(%s) = %v, %v; want it", def[0], got, err)
		}
	}
}
