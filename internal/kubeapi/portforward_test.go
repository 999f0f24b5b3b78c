package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	//lint:ignore SA1019 client-go v0.37 still dials and fails in apimachinery's httpstream types
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// echoServer serves on loopback, echoing what each connection sends until
// it half-closes. It returns its address.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	return ln.Addr().String()
}

// fakeDialer dials addr for any port of any pod, recording what it was
// asked for; a port of 1 fails as a port nothing listens on.
type fakeDialer struct {
	addr  string
	mu    sync.Mutex
	asked []string
}

func (f *fakeDialer) dial(ctx context.Context, p *v1.Pod, port int32) (net.Conn, error) {
	f.mu.Lock()
	f.asked = append(f.asked, fmt.Sprintf("%s/%s:%d", p.Namespace, p.Name, port))
	f.mu.Unlock()
	if port == 1 {
		return nil, fmt.Errorf("dial tcp 127.0.0.1:%d: connect: connection refused", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.addr)
}

// dialers are the ways kubectl reaches pods/portforward: SPDY tunnelled
// in a WebSocket (its first choice) and SPDY.
var dialers = []struct {
	name string
	new  func(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error)
}{
	{"websocket tunnel", func(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error) {
		return portforward.NewSPDYOverWebsocketDialer(u, cfg)
	}},
	{"spdy", func(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error) {
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, err
		}
		return spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u), nil
	}},
}

// forward starts client-go's port forwarder from a free local port to
// remote, and returns the local address.
func forward(t *testing.T, dialer httpstream.Dialer, remote int) string {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remote)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port forwarding ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("port forwarding not ready after 20s")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
}

// TestPortForward: client-go's port forwarder, over each transport,
// reaches the pod's port through Config.DialPod, several connections on
// one session, each ending when the client half-closes; a connection to a
// port nothing listens on ends.
func TestPortForward(t *testing.T) {
	dialer := &fakeDialer{addr: echoServer(t)}
	api := newTestAPI(t, Config{DialPod: dialer.dial})
	api.store.SetPod(runningPod("default", "web", "app"))
	u := api.clientset(t).CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("web").SubResource("portforward").URL()
	for _, d := range dialers {
		t.Run(d.name, func(t *testing.T) {
			dl, err := d.new(api.config, u)
			if err != nil {
				t.Fatal(err)
			}
			local := forward(t, dl, 8080)
			for i := range 3 {
				c, err := net.Dial("tcp", local)
				if err != nil {
					t.Fatal(err)
				}
				msg := fmt.Sprintf("ping %d", i)
				if _, err := c.Write([]byte(msg)); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				got, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(got) != msg {
					t.Fatalf("echo through the forwarded port = %q, %v; want %q", got, err, msg)
				}
			}
			dialer.mu.Lock()
			last := dialer.asked[len(dialer.asked)-1]
			dialer.mu.Unlock()
			if last != "default/web:8080" {
				t.Errorf("dialled %s, want default/web:8080", last)
			}

			// A port nothing listens on: the client's connection ends (the
			// error goes to client-go's log, as kubectl shows it).
			dl, err = d.new(api.config, u)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", forward(t, dl, 1))
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(20 * time.Second))
			got, err := io.ReadAll(c)
			c.Close()
			if err != nil || len(got) != 0 {
				t.Errorf("a connection to a closed port read %q, %v; want it ended", got, err)
			}
		})
	}
}

// nopStream is a forwarded connection's stream that is never used.
type nopStream struct{}

func (nopStream) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopStream) Write(b []byte) (int, error) { return len(b), nil }
func (nopStream) Close() error                { return nil }

// TestPortForwardErrors: what the client is told when the pod's port
// cannot be reached, the kubelet's words.
func TestPortForwardErrors(t *testing.T) {
	d := &fakeDialer{}
	fw := forwarder{ctx: context.Background(), dial: d.dial, pod: runningPod("default", "web", "app")}
	cases := []struct {
		port int32
		want string
	}{
		{1, "failed to connect to localhost:1 inside the network namespace of pod default/web: dial tcp 127.0.0.1:1: connect: connection refused"},
		{0, "invalid port 0"},
		{70000, "invalid port 70000"},
	}
	for _, tc := range cases {
		err := fw.PortForward(context.Background(), "default/web", "uid", tc.port, nopStream{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("PortForward(%d) = %v, want %q", tc.port, err, tc.want)
		}
	}
}
