package registry

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker"
)

// TestHosts: a hosts.toml mirror comes before its registry; a registry
// with no hosts.toml is reached over https. (A loopback one shows as https
// too: containerd tries it first, then falls back to plain HTTP, which the
// end-to-end tests cover.)
func TestHosts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "registry.invalid", "hosts.toml"), `server = "https://registry.invalid"

[host."http://127.0.0.1:5001"]
  capabilities = ["pull", "resolve"]
`, 0o644)
	creds := filepath.Join(dir, "config.json")
	writeFile(t, creds, `{"auths": {"127.0.0.1:5001": {"auth": "`+b64("u:p")+`"}}}`, 0o600)
	hosts, err := Hosts(context.Background(), Config{CredentialFiles: []string{creds}, HostsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		registry string
		want     []string // scheme://host of each endpoint, in order
	}{
		{registry: "registry.invalid", want: []string{"http://127.0.0.1:5001", "https://registry.invalid"}},
		{registry: "registry.example.com", want: []string{"https://registry.example.com"}},
		{registry: "127.0.0.1:5000", want: []string{"https://127.0.0.1:5000"}},
		{registry: "10.0.0.1:5000", want: []string{"https://10.0.0.1:5000"}},
	}
	for _, tt := range tests {
		got, err := hosts(tt.registry)
		if err != nil {
			t.Errorf("hosts(%q): %v", tt.registry, err)
			continue
		}
		var endpoints []string
		for _, h := range got {
			endpoints = append(endpoints, h.Scheme+"://"+h.Host)
		}
		if len(endpoints) != len(tt.want) {
			t.Errorf("hosts(%q) = %q, want %q", tt.registry, endpoints, tt.want)
			continue
		}
		for i := range endpoints {
			if endpoints[i] != tt.want[i] {
				t.Errorf("hosts(%q) = %q, want %q", tt.registry, endpoints, tt.want)
				break
			}
		}
		if got[0].Authorizer == nil {
			t.Errorf("hosts(%q) has no authorizer", tt.registry)
		}
		if tt.registry == "registry.invalid" && got[0].Capabilities.Has(docker.HostCapabilityPush) {
			t.Errorf("mirror of %q may push, want pull and resolve only", tt.registry)
		}
	}

	if _, err := Hosts(context.Background(), Config{CredentialFiles: []string{dir}}); err == nil {
		t.Errorf("Hosts with an unreadable credentials file: no error")
	}
}
