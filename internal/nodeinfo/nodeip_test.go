package nodeinfo

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseNodeIP(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string // in the error; "" for none
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "192.0.2.7", want: []string{"192.0.2.7"}},
		{in: " 2001:db8::7 ", want: []string{"2001:db8::7"}},
		{in: "192.0.2.7,2001:db8::7", want: []string{"192.0.2.7", "2001:db8::7"}},
		{in: "2001:db8::7, 192.0.2.7", want: []string{"2001:db8::7", "192.0.2.7"}},
		{in: "::ffff:192.0.2.7", want: []string{"192.0.2.7"}},
		{in: "0.0.0.0", want: []string{"0.0.0.0"}},
		{in: "::", want: []string{"::"}},
		{in: "node1", wantErr: `"node1" is not an IP address`},
		{in: "192.0.2.300", wantErr: `"192.0.2.300" is not an IP address`},
		{in: "192.0.2.0/24", wantErr: `"192.0.2.0/24" is not an IP address`},
		{in: "fe80::1%eth0", wantErr: `"fe80::1%eth0" is not an IP address`},
		{in: "192.0.2.7,", wantErr: `"" is not an IP address`},
		{in: "192.0.2.7,192.0.2.8", wantErr: "dual-stack pair"},
		{in: "2001:db8::7,2001:db8::8", wantErr: "dual-stack pair"},
		{in: "192.0.2.7,2001:db8::7,192.0.2.8", wantErr: "dual-stack pair"},
		{in: "0.0.0.0,2001:db8::7", wantErr: "cannot hold an unspecified address"},
		{in: "192.0.2.7,::", wantErr: "cannot hold an unspecified address"},
	} {
		got, err := ParseNodeIP(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseNodeIP(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(addrStrings(got), tc.want) {
			t.Errorf("ParseNodeIP(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestNodeIPs: given addresses are the node's, in order, when the host has
// them and the kubelet's rule takes them.
func TestNodeIPs(t *testing.T) {
	host := addrs("127.0.0.1", "::1", "192.0.2.7", "2001:db8::7", "fe80::1", "198.51.100.1")
	for _, tc := range []struct {
		given   string
		want    []string
		wantErr string
	}{
		{given: "192.0.2.7", want: []string{"192.0.2.7"}},
		{given: "198.51.100.1", want: []string{"198.51.100.1"}},
		{given: "2001:db8::7,192.0.2.7", want: []string{"2001:db8::7", "192.0.2.7"}},
		{given: "192.0.2.8", wantErr: "192.0.2.8: not an address of this host"},
		{given: "192.0.2.7,2001:db8::8", wantErr: "2001:db8::8: not an address of this host"},
		{given: "127.0.0.1", wantErr: "127.0.0.1: a loopback address"},
		{given: "::1", wantErr: "::1: a loopback address"},
		{given: "fe80::1", wantErr: "fe80::1: a link-local address"},
		{given: "224.0.0.1", wantErr: "224.0.0.1: a multicast address"},
	} {
		given, err := ParseNodeIP(tc.given)
		if err != nil {
			t.Fatalf("ParseNodeIP(%q): %v", tc.given, err)
		}
		got, err := NodeIPs(t.TempDir(), given, host)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NodeIPs(%s) = %v, %v; want an error with %q", tc.given, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(addrStrings(got), tc.want) {
			t.Errorf("NodeIPs(%s) = %v, %v; want %v", tc.given, got, err, tc.want)
		}
	}
}

// TestNodeIPsDefaultRoute: with none given, or 0.0.0.0 or ::, the node's
// address is the default route's; with no default route, none.
func TestNodeIPsDefaultRoute(t *testing.T) {
	for _, given := range []string{"", "0.0.0.0", "::"} {
		ips, _ := ParseNodeIP(given)
		got, err := NodeIPs(t.TempDir(), ips, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("NodeIPs(%q) without a default route = %v, %v; want none", given, got, err)
		}
	}
	// This machine's: the address PrimaryAddress picks, if any.
	got, err := NodeIPs("/", nil, nil)
	if err != nil {
		t.Fatalf("NodeIPs(/): %v", err)
	}
	if ip, ok := PrimaryAddress("/", false); ok != (len(got) == 1) || (ok && got[0].String() != ip.String()) {
		t.Errorf("NodeIPs(/) = %v, want PrimaryAddress's %v", got, ip)
	}
}

func TestHostAddresses(t *testing.T) {
	got, err := HostAddresses()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("HostAddresses() = %v, want 127.0.0.1 among them", got)
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func addrStrings(as []netip.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}
