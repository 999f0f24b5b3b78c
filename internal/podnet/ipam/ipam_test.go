package ipam

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func prefixes(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cidrs   []string
		wantErr bool
	}{
		{"v4", []string{"10.213.0.0/24"}, false},
		{"dual stack", []string{"10.213.0.0/24", "fd00:213::/64"}, false},
		{"two v4", []string{"10.213.0.0/24", "10.214.0.0/24"}, true},
		{"too small", []string{"10.213.0.0/31"}, true},
		{"smallest", []string{"10.213.0.0/30"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(t.TempDir(), prefixes(t, tt.cidrs...))
			if (err != nil) != tt.wantErr {
				t.Errorf("New(%v) = %v, want error %v", tt.cidrs, err, tt.wantErr)
			}
		})
	}
}

func TestGateway(t *testing.T) {
	for in, want := range map[string]string{
		"10.213.0.0/24": "10.213.0.1/24",
		"10.213.0.7/24": "10.213.0.1/24",
		"fd00:213::/64": "fd00:213::1/64",
	} {
		if got := Gateway(netip.MustParsePrefix(in)).String(); got != want {
			t.Errorf("Gateway(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAllocateReleasePersist(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ipam")
	p, err := New(dir, prefixes(t, "10.213.0.0/24", "fd00:213::/64"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Allocate("sb-a")
	if err != nil {
		t.Fatalf("Allocate(sb-a): %v", err)
	}
	if got := []string{a[0].String(), a[1].String()}; !slices.Equal(got, []string{"10.213.0.2/24", "fd00:213::2/64"}) {
		t.Errorf("Allocate(sb-a) = %v, want the first addresses after the gateways", got)
	}
	b, err := p.Allocate("sb-b")
	if err != nil {
		t.Fatalf("Allocate(sb-b): %v", err)
	}
	if b[0].Addr() != netip.MustParseAddr("10.213.0.3") {
		t.Errorf("Allocate(sb-b) = %v, want 10.213.0.3", b)
	}

	// A new pool on the same directory (a restarted staticlet) sees both.
	p2, err := New(dir, prefixes(t, "10.213.0.0/24", "fd00:213::/64"))
	if err != nil {
		t.Fatal(err)
	}
	owners, err := p2.Owners()
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 2 || len(owners["sb-a"]) != 2 || owners["sb-a"][0].Addr != a[0].Addr() && owners["sb-a"][1].Addr != a[0].Addr() {
		t.Errorf("Owners() after a restart = %v, want sb-a and sb-b with two addresses each", owners)
	}
	if err := p2.Release("sb-a"); err != nil {
		t.Fatalf("Release(sb-a): %v", err)
	}
	owners, _ = p2.Owners()
	if _, ok := owners["sb-a"]; ok || len(owners["sb-b"]) != 2 {
		t.Errorf("Owners() after Release(sb-a) = %v, want only sb-b", owners)
	}
	if err := p2.Release("sb-a"); err != nil {
		t.Errorf("second Release(sb-a): %v", err)
	}
	// A released address is not handed out again at once.
	c, err := p2.Allocate("sb-c")
	if err != nil {
		t.Fatal(err)
	}
	if c[0].Addr() != netip.MustParseAddr("10.213.0.4") {
		t.Errorf("Allocate(sb-c) = %v, want 10.213.0.4 (the cursor survives restarts)", c)
	}
}

func TestAllocateExhaustedLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// A /30 has one address for pods; the v6 range has plenty.
	p, err := New(dir, prefixes(t, "10.213.0.0/30", "fd00:213::/64"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Allocate("one")
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Addr() != netip.MustParseAddr("10.213.0.2") {
		t.Errorf("Allocate(one) = %v, want 10.213.0.2", a)
	}
	if _, err := p.Allocate("two"); err == nil {
		t.Fatal("Allocate(two) in a full range succeeded")
	}
	owners, _ := p.Owners()
	if _, ok := owners["two"]; ok {
		t.Errorf("a failed Allocate left %v", owners["two"])
	}
	if err := p.Release("one"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Allocate("two"); err != nil {
		t.Errorf("Allocate after Release: %v", err)
	}
}

func TestOwnersIgnoresStrayFiles(t *testing.T) {
	dir := t.TempDir()
	p, _ := New(dir, prefixes(t, "10.213.0.0/24"))
	if _, err := p.Allocate("sb"); err != nil {
		t.Fatal(err)
	}
	// A file created but not yet written when staticlet was killed.
	if err := os.WriteFile(filepath.Join(dir, "10.213.0.0_24", "10.213.0.9"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	owners, err := p.Owners()
	if err != nil {
		t.Fatal(err)
	}
	if len(owners["sb"]) != 1 || len(owners[""]) != 1 {
		t.Errorf("Owners() = %v, want sb and one unowned address", owners)
	}
	if err := p.Release(""); err != nil {
		t.Fatal(err)
	}
	if owners, _ := p.Owners(); len(owners[""]) != 0 {
		t.Errorf("Release(\"\") left %v", owners[""])
	}
}
