package etcdtest

import (
	"fmt"
	"net"
)

// Member is a one-member etcd cluster as kubeadm configures a local etcd
// on a control-plane node, but on loopback ports free when it was made,
// so that tests do not clash with each other or with a real etcd.
type Member struct {
	// Name is the member's name; kubeadm gives it the node's.
	Name string
	// ClientPort, PeerPort and MetricsPort are kubeadm's 2379, 2380 and
	// 2381, on 127.0.0.1.
	ClientPort, PeerPort, MetricsPort int
}

// NewMember returns a member called name on three free loopback ports.
func NewMember(name string) (Member, error) {
	m := Member{Name: name}
	for _, p := range []*int{&m.ClientPort, &m.PeerPort, &m.MetricsPort} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return Member{}, fmt.Errorf("finding a free port: %w", err)
		}
		*p = ln.Addr().(*net.TCPAddr).Port
		// Closed at once: the port is free until etcd takes it, which is
		// racy only against other processes that ask for port 0.
		ln.Close()
	}
	return m, nil
}

// ClientURL is the member's client URL, which Client talks to.
func (m Member) ClientURL() string { return fmt.Sprintf("https://127.0.0.1:%d", m.ClientPort) }

func (m Member) peerURL() string { return fmt.Sprintf("https://127.0.0.1:%d", m.PeerPort) }

// HealthURL is what kubeadm's startup probe asks, for Healthy: healthy
// once a linearizable read succeeds, that is, with a leader.
func (m Member) HealthURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/health?serializable=false", m.MetricsPort)
}

// MetricsFlag is the flag of the member's metrics URL, where its health
// endpoint is: no other process's arguments hold it while the member runs.
func (m Member) MetricsFlag() string {
	return fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", m.MetricsPort)
}

// Flags are the flags kubeadm 1.30 gives etcd, for the member with the
// certificates WritePKI writes in pkiDir and its data in dataDir, both as
// etcd sees them.
func (m Member) Flags(pkiDir, dataDir string) []string {
	return []string{
		"--advertise-client-urls=" + m.ClientURL(),
		"--cert-file=" + pkiDir + "/" + Server + ".crt",
		"--client-cert-auth=true",
		"--data-dir=" + dataDir,
		"--experimental-initial-corrupt-check=true",
		"--experimental-watch-progress-notify-interval=5s",
		"--initial-advertise-peer-urls=" + m.peerURL(),
		"--initial-cluster=" + m.Name + "=" + m.peerURL(),
		"--key-file=" + pkiDir + "/" + Server + ".key",
		"--listen-client-urls=" + m.ClientURL(),
		m.MetricsFlag(),
		"--listen-peer-urls=" + m.peerURL(),
		"--name=" + m.Name,
		"--peer-cert-file=" + pkiDir + "/" + Peer + ".crt",
		"--peer-client-cert-auth=true",
		"--peer-key-file=" + pkiDir + "/" + Peer + ".key",
		"--peer-trusted-ca-file=" + pkiDir + "/" + CA + ".crt",
		"--snapshot-count=10000",
		"--trusted-ca-file=" + pkiDir + "/" + CA + ".crt",
	}
}
