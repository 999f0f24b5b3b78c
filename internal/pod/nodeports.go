package pod

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"
)

// NodePorts is the evidence a pod's spec gives of the TCP and UDP ports
// it serves on the node, and of the ports on the node it talks to. It
// orders stops: a pod that reaches a port another pod serves stops
// before that pod (a kube-apiserver whose --etcd-servers names
// 127.0.0.1:2379 before the etcd that listens there), whatever order
// the pods became Ready in, and whether or not staticlet was restarted
// in between. It is read from the spec alone, so it is the same every
// time.
type NodePorts struct {
	// Serves holds the ports the pod listens on in the node's network
	// namespace: its hostPorts; with hostNetwork, its containerPorts, the
	// ports its probes check, and the ports in listening flags
	// (--listen-*, --bind-*, --advertise-*, --*port) and environment
	// variables (*LISTEN*, *BIND*, *ADVERTISE*, *PORT).
	Serves []int
	// Reaches holds the ports of the addresses the pod's command, args,
	// environment and exec handlers name (a URL or host:port whose host
	// is an IP address or localhost), other than in listening flags and
	// other than the ports it serves itself. A pod with its own network
	// namespace reaches the node only through an address that is not
	// loopback.
	Reaches []int
}

// addrPort matches one piece of text that is an address with a port: a
// host:port, or a URL, whose host is an IPv4 address, a bracketed IPv6
// address, localhost or empty (":8080"). A host name other than localhost
// does not count: it says nothing of where it leads.
var addrPort = regexp.MustCompile(`(?i)^(?:[a-z][a-z0-9+.\-]*://)?(?:[^@/]*@)?(\[[0-9a-f:.]*\]|localhost|\d{1,3}(?:\.\d{1,3}){3})?:(\d{1,5})(?:[/?#].*)?$`)

// addrSeparator tells the runes that separate addresses in a flag's value
// or a shell script: lists, assignments, quotes and shell syntax.
func addrSeparator(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune(",;=()'\"`|&<>{}", r)
}

// NodePorts returns the evidence p's spec gives of the ports it serves on
// the node and the ports on the node it reaches.
func (p *Pod) NodePorts() NodePorts {
	host := p.Spec.HostNetwork
	serves := map[int]bool{}
	reaches := map[int]bool{}
	for _, c := range allContainers(&p.Spec) {
		for _, cp := range c.Ports {
			if cp.HostPort > 0 {
				serves[int(cp.HostPort)] = true
			}
			if host && cp.ContainerPort > 0 {
				serves[int(cp.ContainerPort)] = true
			}
		}
		if host {
			for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
				if n := probePort(pr, c); n > 0 {
					serves[n] = true
				}
			}
		}
		for _, w := range words(c) {
			for _, a := range addresses(w.text) {
				switch {
				case w.listens:
					if host {
						serves[a.port] = true
					}
				case host || !a.local:
					reaches[a.port] = true
				}
			}
			if w.listens && host {
				if n, err := strconv.Atoi(w.text); err == nil && n > 0 && n < 1<<16 {
					serves[n] = true
				}
			}
		}
	}
	for n := range serves {
		delete(reaches, n)
	}
	return NodePorts{Serves: sortedPorts(serves), Reaches: sortedPorts(reaches)}
}

// Needs tells whether a pod with evidence np reaches a port other serves.
func (np NodePorts) Needs(other NodePorts) bool {
	for _, n := range np.Reaches {
		if _, found := slices.BinarySearch(other.Serves, n); found {
			return true
		}
	}
	return false
}

// allContainers returns the init and app containers of spec.
func allContainers(spec *v1.PodSpec) []*v1.Container {
	var out []*v1.Container
	for i := range spec.InitContainers {
		out = append(out, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		out = append(out, &spec.Containers[i])
	}
	return out
}

// probePort is the port a probe checks, 0 for an exec probe or none.
func probePort(pr *v1.Probe, c *v1.Container) int {
	if pr == nil {
		return 0
	}
	var n int
	var err error
	switch h := pr.ProbeHandler; {
	case h.HTTPGet != nil:
		n, err = ContainerPort(h.HTTPGet.Port, c)
	case h.TCPSocket != nil:
		n, err = ContainerPort(h.TCPSocket.Port, c)
	case h.GRPC != nil:
		n = int(h.GRPC.Port)
	}
	if err != nil {
		return 0
	}
	return n
}

// word is a piece of a container's command line or environment, and
// whether it is the value of a listening flag or variable.
type word struct {
	text    string
	listens bool
}

// words returns the pieces of c's command, args, environment values and
// exec handlers, each command word also split at white space (a shell
// script in one word), with the values of flags (--name=value, or
// --name value) told apart by whether the flag is a listening one.
func words(c *v1.Container) []word {
	var cmds [][]string
	cmds = append(cmds, slices.Concat(c.Command, c.Args))
	for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if pr != nil && pr.Exec != nil {
			cmds = append(cmds, pr.Exec.Command)
		}
	}
	if lc := c.Lifecycle; lc != nil {
		for _, h := range []*v1.LifecycleHandler{lc.PostStart, lc.PreStop} {
			if h != nil && h.Exec != nil {
				cmds = append(cmds, h.Exec.Command)
			}
		}
	}
	var out []word
	for _, cmd := range cmds {
		var toks []string
		for _, arg := range cmd {
			toks = append(toks, strings.Fields(arg)...)
		}
		listening := false // the previous token is a listening flag without a value
		for _, tok := range toks {
			name, val, isFlag := strings.Cut(tok, "=")
			switch {
			case strings.HasPrefix(tok, "-") && isFlag:
				out = append(out, word{text: val, listens: listenName(name)})
				listening = false
			case strings.HasPrefix(tok, "-"):
				listening = listenName(tok)
			default:
				out = append(out, word{text: tok, listens: listening})
				listening = false
			}
		}
	}
	for _, e := range c.Env {
		out = append(out, word{text: e.Value, listens: listenName(e.Name)})
	}
	return out
}

// listenName tells whether a flag or environment variable of this name
// says where its program listens.
func listenName(name string) bool {
	n := strings.ToLower(strings.TrimLeft(name, "-"))
	for _, s := range []string{"listen", "bind", "advertise"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return n == "port" || strings.HasSuffix(n, "-port") || strings.HasSuffix(n, "_port")
}

// address is a port found in text, and whether its host is local (a
// loopback or unspecified address, localhost, or none).
type address struct {
	port  int
	local bool
}

// addresses returns the addresses with a port in text.
func addresses(text string) []address {
	var out []address
	for _, piece := range strings.FieldsFunc(text, addrSeparator) {
		m := addrPort.FindStringSubmatch(piece)
		if m == nil {
			continue
		}
		port, err := strconv.Atoi(m[2])
		if err != nil || port == 0 || port >= 1<<16 {
			continue
		}
		host := strings.Trim(m[1], "[]")
		local := host == "" || strings.EqualFold(host, "localhost")
		if ip, err := netip.ParseAddr(host); err == nil {
			local = ip.IsLoopback() || ip.IsUnspecified()
		} else if !local {
			continue // not an address: 999.1.1.1
		}
		out = append(out, address{port: port, local: local})
	}
	return out
}

// sortedPorts returns the ports of set in order; nil when it is empty.
func sortedPorts(set map[int]bool) []int {
	if len(set) == 0 {
		return nil
	}
	out := make([]int, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// StopNeeds is what orders a pod's stop among the pods that stop with it:
// the ports it serves and reaches on the node, and the pods it names in
// staticlet.io/after. It is written in a label on each container the pod
// makes (String), so that a pod whose manifest went while staticlet was
// not running still stops in order.
type StopNeeds struct {
	Ports NodePorts
	After []Key
}

// StopNeeds returns what orders p's stop.
func (p *Pod) StopNeeds() StopNeeds {
	return StopNeeds{Ports: p.NodePorts(), After: p.AfterKeys()}
}

// Needs tells whether a pod with needs n needs pod other, whose needs are
// o: it names other in staticlet.io/after, or reaches a port other serves.
func (n StopNeeds) Needs(other Key, o StopNeeds) bool {
	return slices.Contains(n.After, other) || n.Ports.Needs(o.Ports)
}

// String encodes n for a label: "serves=P,P;reaches=P,P;after=NS/NAME,..."
// with the empty parts left out; empty when n is.
func (n StopNeeds) String() string {
	var parts []string
	add := func(name string, vals []string) {
		if len(vals) > 0 {
			parts = append(parts, name+"="+strings.Join(vals, ","))
		}
	}
	itoa := func(ports []int) []string {
		out := make([]string, len(ports))
		for i, p := range ports {
			out[i] = strconv.Itoa(p)
		}
		return out
	}
	add("serves", itoa(n.Ports.Serves))
	add("reaches", itoa(n.Ports.Reaches))
	after := make([]string, len(n.After))
	for i, k := range n.After {
		after[i] = k.String()
	}
	add("after", after)
	return strings.Join(parts, ";")
}

// ParseStopNeeds decodes what String encoded.
func ParseStopNeeds(s string) (StopNeeds, error) {
	var n StopNeeds
	if s == "" {
		return n, nil
	}
	ports := func(val string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(val, ",") {
			p, err := strconv.Atoi(f)
			if err != nil || p <= 0 || p >= 1<<16 {
				return nil, fmt.Errorf("bad port %q", f)
			}
			out = append(out, p)
		}
		slices.Sort(out)
		return out, nil
	}
	for _, part := range strings.Split(s, ";") {
		name, val, _ := strings.Cut(part, "=")
		var err error
		switch name {
		case "serves":
			n.Ports.Serves, err = ports(val)
		case "reaches":
			n.Ports.Reaches, err = ports(val)
		case "after":
			for _, f := range strings.Split(val, ",") {
				ns, name, ok := strings.Cut(f, "/")
				if !ok || ns == "" || name == "" {
					return StopNeeds{}, fmt.Errorf("stop needs %q: bad pod %q", s, f)
				}
				n.After = append(n.After, Key{Namespace: ns, Name: name})
			}
		default:
			err = fmt.Errorf("unknown part %q", name)
		}
		if err != nil {
			return StopNeeds{}, fmt.Errorf("stop needs %q: %w", s, err)
		}
	}
	return n, nil
}
