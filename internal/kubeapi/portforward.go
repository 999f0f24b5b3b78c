package kubeapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	pfconst "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/tools/portforward"
	criportforward "k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// dialTimeout bounds the connection to a pod's port for one forwarded
// connection.
const dialTimeout = 10 * time.Second

// PodDialer connects to port of pod p on the pod's loopback address, from
// inside the pod's network namespace (the node's for a hostNetwork pod),
// as the kubelet's port forwarding does: a server that listens on
// 127.0.0.1 in the pod is reachable. The connection must be usable from
// any goroutine.
type PodDialer func(ctx context.Context, p *v1.Pod, port int32) (net.Conn, error)

// servePortForward serves pods/portforward: SPDY (each forwarded
// connection a pair of streams, the port in their headers), SPDY tunnelled
// in a WebSocket (what kubectl tries first), and the older WebSocket
// channel protocol (ports in the query).
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request, req request) {
	if s.cfg.DialPod == nil {
		s.writeStatus(w, r, notServed("pods/portforward"))
		return
	}
	p := s.podNamed(req.namespace, req.name)
	if p == nil {
		s.writeStatus(w, r, apierrors.NewNotFound(v1.Resource("pods"), req.name))
		return
	}
	key := p.Namespace + "/" + p.Name
	fw := forwarder{ctx: r.Context(), dial: s.cfg.DialPod, pod: p}
	s.log.Info("port forwarding", "pod", key)
	var opts *criportforward.V4Options
	var err error
	switch {
	case wsstream.IsWebSocketRequest(r) && tunnelsSPDY(r):
		w, r = newTunnel(w, r), spdyRequest(r)
	case wsstream.IsWebSocketRequest(r):
		if opts, err = criportforward.NewV4Options(r); err != nil {
			s.writeStatus(w, r, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	criportforward.ServePortForward(w, r, fw, key, string(p.UID), opts, streamIdleTimeout, streamCreationTimeout,
		criportforward.SupportedProtocols)
}

// forwarder forwards connections to the ports of one pod, for one
// request: its connections are closed when the request's context ends
// (the session ends, the server stops).
type forwarder struct {
	ctx  context.Context
	dial PodDialer
	pod  *v1.Pod
}

// PortForward copies between stream and a new connection to port in the
// pod until both sides are done: the client's end of input half-closes
// the connection, and the pod's end of output ends the stream. The
// context cri-streaming passes is not the request's: f.ctx is used.
func (f forwarder) PortForward(_ context.Context, name, _ string, port int32, stream io.ReadWriteCloser) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port %d", port)
	}
	dctx, cancel := context.WithTimeout(f.ctx, dialTimeout)
	conn, err := f.dial(dctx, f.pod, port)
	cancel()
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside the network namespace of pod %s: %w", port, name, err)
	}
	defer conn.Close()
	defer context.AfterFunc(f.ctx, func() { conn.Close() })()
	var wg sync.WaitGroup
	// The client ends its stream (a reset when it is done with the
	// connection): the wait ends with it.
	defer wg.Wait()
	wg.Go(func() {
		_, _ = io.Copy(conn, stream)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	})
	_, err = io.Copy(stream, conn)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("copying from port %d of pod %s: %w", port, name, err)
	}
	return nil
}

// tunnelsSPDY tells whether a WebSocket request offers the SPDY tunnel of
// port forwarding.
func tunnelsSPDY(r *http.Request) bool {
	for _, p := range gwebsocket.Subprotocols(r) {
		if p == pfconst.WebsocketsSPDYTunnelingPortForwardV1 {
			return true
		}
	}
	return false
}

// spdyRequest is the SPDY upgrade request that a tunnelling WebSocket
// request stands for, as the apiserver makes it for the kubelet.
func spdyRequest(r *http.Request) *http.Request {
	c := r.Clone(r.Context())
	c.Header.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	c.Header.Set(httpstream.HeaderUpgrade, spdy.HeaderSpdy31)
	c.Header.Set(httpstream.HeaderProtocolVersion, pfconst.PortForwardV1Name)
	return c
}

// tunnel is the response writer of an SPDY session tunnelled in a
// WebSocket: errors before the upgrade are written as they are; the
// SPDY upgrade's 101 is not (the WebSocket's is sent instead); and the
// hijacked connection is the WebSocket, whose binary messages carry the
// SPDY connection's bytes.
type tunnel struct {
	w      http.ResponseWriter
	r      *http.Request
	header http.Header
}

func newTunnel(w http.ResponseWriter, r *http.Request) *tunnel {
	return &tunnel{w: w, r: r, header: http.Header{}}
}

func (t *tunnel) Header() http.Header { return t.header }

func (t *tunnel) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		return
	}
	for k, v := range t.header {
		t.w.Header()[k] = v
	}
	t.w.WriteHeader(code)
}

func (t *tunnel) Write(b []byte) (int, error) { return t.w.Write(b) }

// Hijack answers the WebSocket upgrade and returns the tunnel.
func (t *tunnel) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	up := gwebsocket.Upgrader{
		// The client is authenticated by its certificate; a browser's
		// origin means nothing here.
		CheckOrigin:  func(*http.Request) bool { return true },
		Subprotocols: []string{pfconst.WebsocketsSPDYTunnelingPortForwardV1},
	}
	ws, err := up.Upgrade(t.w, t.r, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("upgrading the port forwarding tunnel: %w", err)
	}
	conn := portforward.NewTunnelingConnection("server", ws)
	return conn, bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn)), nil
}
