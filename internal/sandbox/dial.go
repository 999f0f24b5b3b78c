package sandbox

import (
	"context"
	"net"

	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// DialPod connects to addr (a literal IP and port) from inside the network
// namespace of the pod that container id, in sandbox sandboxID, runs in:
// how probes reach a pod that has no address of its own. The connection
// is usable from any goroutine.
func (r *Runtime) DialPod(ctx context.Context, id, sandboxID, network, addr string) (net.Conn, error) {
	nsPath, err := r.podNetNS(ctx, id, sandboxID)
	if err != nil {
		return nil, err
	}
	// FallbackDelay < 0: the dial happens on the calling goroutine, so in
	// the namespace netns.Do put its thread in.
	dialer := &net.Dialer{FallbackDelay: -1}
	var conn net.Conn
	err = netns.Do(nsPath, func() error {
		var err error
		conn, err = dialer.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}
