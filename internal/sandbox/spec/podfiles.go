package spec

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// clusterDomain is the DNS domain pods' fully qualified names end in. With
// no cluster there is no cluster DNS to serve it, but names stay the
// kubelet's so that software that builds them keeps working.
const clusterDomain = "cluster.local"

// Limits the kubelet applies to a pod's resolv.conf.
const (
	maxNameservers = 3
	maxSearches    = 32
)

// PodFiles are the contents of the /etc files a pod's containers see.
type PodFiles struct {
	Hosts    string
	Resolv   string
	Hostname string
}

// PodFilesFor computes p's /etc/hosts, /etc/resolv.conf and /etc/hostname
// as the kubelet writes them, from the host's own files and name.
func PodFilesFor(p *pod.Pod, hostHosts, hostResolv, hostName, podIP string) PodFiles {
	return PodFiles{
		Hosts:    hostsFile(p, hostHosts, podIP),
		Resolv:   resolvConf(p, hostResolv),
		Hostname: podHostname(p, hostName) + "\n",
	}
}

// podHostname is the name in /etc/hostname: the host's under hostNetwork,
// else the pod's (its FQDN with setHostnameAsFQDN).
func podHostname(p *pod.Pod, hostName string) string {
	if p.Spec.HostNetwork {
		return hostName
	}
	if p.Spec.SetHostnameAsFQDN != nil && *p.Spec.SetHostnameAsFQDN {
		if fqdn := podFQDN(p); fqdn != "" {
			return fqdn
		}
	}
	return Hostname(p)
}

// podFQDN is <hostname>.<subdomain>.<namespace>.svc.<domain> when the pod
// has a subdomain and no hostnameOverride, as the kubelet builds it.
func podFQDN(p *pod.Pod) string {
	if p.Spec.Subdomain == "" || p.Spec.HostnameOverride != nil {
		return ""
	}
	return fmt.Sprintf("%s.%s.%s.svc.%s", Hostname(p), p.Spec.Subdomain, p.Namespace, clusterDomain)
}

// hostsFile is the kubelet's managed /etc/hosts: under hostNetwork the
// host's file, else the standard entries and the pod's own; then the pod's
// hostAliases.
func hostsFile(p *pod.Pod, hostHosts, podIP string) string {
	var b strings.Builder
	if p.Spec.HostNetwork {
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.WriteString(hostHosts)
		if hostHosts != "" && !strings.HasSuffix(hostHosts, "\n") {
			b.WriteString("\n")
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		if podIP != "" {
			if fqdn := podFQDN(p); fqdn != "" {
				fmt.Fprintf(&b, "%s\t%s\t%s\n", podIP, fqdn, Hostname(p))
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", podIP, Hostname(p))
			}
		}
	}
	if len(p.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range p.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.String()
}

// resolvConf is the pod's /etc/resolv.conf. There is no cluster DNS, so
// ClusterFirst and ClusterFirstWithHostNet fall back to the host's
// resolvers as the kubelet does without one; None starts empty; dnsConfig
// is merged on top.
func resolvConf(p *pod.Pod, hostResolv string) string {
	var servers, searches []string
	var options []string
	if p.Spec.DNSPolicy != v1.DNSNone {
		servers, searches, options = parseResolv(hostResolv)
	}
	if c := p.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		for _, s := range c.Searches {
			if !slices.Contains(searches, s) {
				searches = append(searches, s)
			}
		}
		options = mergeOptions(options, c.Options)
	}
	if len(servers) > maxNameservers {
		servers = servers[:maxNameservers]
	}
	if len(searches) > maxSearches {
		searches = searches[:maxSearches]
	}
	var b strings.Builder
	if len(searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(searches, " "))
	}
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String()
}

// parseResolv reads the nameservers, search domains and options of a
// resolv.conf.
func parseResolv(text string) (servers, searches, options []string) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			servers = append(servers, f[1])
		case "search", "domain":
			// The last of search and domain wins, as with the resolver.
			searches = append([]string(nil), f[1:]...)
		case "options":
			options = append(options, f[1:]...)
		}
	}
	return servers, searches, options
}

// mergeOptions adds the pod's options to the host's; a pod option replaces
// a host option of the same name.
func mergeOptions(host []string, pod []v1.PodDNSConfigOption) []string {
	name := func(o string) string { n, _, _ := strings.Cut(o, ":"); return n }
	out := slices.Clone(host)
	for _, o := range pod {
		s := o.Name
		if o.Value != nil {
			s += ":" + *o.Value
		}
		if i := slices.IndexFunc(out, func(x string) bool { return name(x) == o.Name }); i >= 0 {
			out[i] = s
		} else {
			out = append(out, s)
		}
	}
	return out
}
