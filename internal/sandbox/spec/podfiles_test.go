package spec

import (
	"strings"
	"testing"
)

func TestPodFiles(t *testing.T) {
	const hostHosts = "127.0.0.1 localhost\n10.0.0.5 node1\n"
	const hostResolv = "# comment\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch example.test corp.test\noptions ndots:2 edns0\n"
	tests := []struct {
		name     string
		spec     string // lines under spec:, indented two spaces
		podIP    string
		hosts    []string // lines the hosts file must hold
		notHosts []string
		resolv   string
		hostname string
	}{
		{
			name:     "own network, ClusterFirst falls back to the host's resolvers",
			spec:     "  hostAliases:\n  - ip: 192.0.2.10\n    hostnames: [db, db.local]\n",
			podIP:    "10.88.0.4",
			hosts:    []string{"# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost", "10.88.0.4\tweb-n", "# Entries added by HostAliases.", "192.0.2.10\tdb\tdb.local"},
			notHosts: []string{"node1"},
			resolv:   "search example.test corp.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 edns0\n",
			hostname: "web-n\n",
		},
		{
			name:     "host network: the host's hosts file and name",
			spec:     "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n",
			hosts:    []string{"# Kubernetes-managed hosts file (host network).", "10.0.0.5 node1"},
			resolv:   "search example.test corp.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 edns0\n",
			hostname: "node1\n",
		},
		{
			name:     "dnsPolicy None with dnsConfig",
			spec:     "  dnsPolicy: None\n  dnsConfig:\n    nameservers: [198.51.100.1]\n    searches: [a.test]\n    options: [{name: ndots, value: \"5\"}]\n",
			resolv:   "search a.test\nnameserver 198.51.100.1\noptions ndots:5\n",
			hostname: "web-n\n",
		},
		{
			name:     "dnsConfig merged over the host's",
			spec:     "  dnsConfig:\n    nameservers: [198.51.100.1, 198.51.100.2]\n    searches: [corp.test, b.test]\n    options: [{name: ndots, value: \"1\"}, {name: rotate}]\n",
			resolv:   "search example.test corp.test b.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nnameserver 198.51.100.1\noptions ndots:1 edns0 rotate\n",
			hostname: "web-n\n",
		},
		{
			name:     "hostname, subdomain and FQDN",
			spec:     "  hostname: app\n  subdomain: grp\n  setHostnameAsFQDN: true\n",
			podIP:    "10.88.0.9",
			hosts:    []string{"10.88.0.9\tapp.grp.default.svc.cluster.local\tapp"},
			resolv:   "search example.test corp.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 edns0\n",
			hostname: "app.grp.default.svc.cluster.local\n",
		},
		{
			name:     "hostnameOverride: the name as given, no FQDN",
			spec:     "  hostname: app\n  subdomain: grp\n  hostnameOverride: my.host\n",
			podIP:    "10.88.0.9",
			hosts:    []string{"10.88.0.9\tmy.host"},
			notHosts: []string{"svc.cluster.local"},
			resolv:   "search example.test corp.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 edns0\n",
			hostname: "my.host\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := decodePod(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n"+tt.spec+"  containers:\n  - name: c\n    image: busybox\n")
			f := PodFilesFor(p, hostHosts, hostResolv, "node1", tt.podIP)
			for _, l := range tt.hosts {
				if !strings.Contains(f.Hosts, l+"\n") {
					t.Errorf("hosts file lacks %q:\n%s", l, f.Hosts)
				}
			}
			for _, l := range tt.notHosts {
				if strings.Contains(f.Hosts, l) {
					t.Errorf("hosts file holds %q:\n%s", l, f.Hosts)
				}
			}
			if f.Resolv != tt.resolv {
				t.Errorf("resolv.conf =\n%s\nwant\n%s", f.Resolv, tt.resolv)
			}
			if f.Hostname != tt.hostname {
				t.Errorf("hostname = %q, want %q", f.Hostname, tt.hostname)
			}
		})
	}
}
