package kubeapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	clientremote "k8s.io/client-go/tools/remotecommand"

	"github.com/staticlet/staticlet/internal/status"
)

// serveOwn runs api's server with Serve on a listener of its own, with
// the test CA's server certificate. It returns a client config for it,
// the function that stops Serve, and what Serve returns (then closed).
func serveOwn(t *testing.T, api *testAPI) (*rest.Config, context.CancelFunc, <-chan error) {
	t.Helper()
	certPEM, keyPEM := api.ca.issue(t, "127.0.0.1", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- api.srv.Serve(ctx, ln, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: api.ca.pool,
			ClientAuth: tls.VerifyClientCertIfGiven})
		close(served)
	}()
	t.Cleanup(func() {
		stop()
		<-served
	})
	cfg := rest.CopyConfig(api.config)
	cfg.Host = "https://" + ln.Addr().String()
	return cfg, stop, served
}

// waitAll waits for each channel to deliver, failing after 20 s.
func waitAll(t *testing.T, chans map[string]<-chan error) {
	t.Helper()
	for what, ch := range chans {
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s still under way 20s after Serve was stopped", what)
		}
	}
}

// TestServeEndsExec: when Serve stops, an exec session under way ends
// (its command's context is cancelled) and Serve returns once it has, on
// every transport.
func TestServeEndsExec(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			started, killed := make(chan struct{}), make(chan struct{})
			exec := func(ctx context.Context, _ string, _ status.ExecOptions) (int, error) {
				close(started)
				<-ctx.Done()
				close(killed)
				return 137, nil
			}
			api := newTestAPI(t, Config{Exec: exec})
			api.store.SetPod(runningPod("default", "web", "app"))
			cfg, stop, served := serveOwn(t, api)
			u := streamURL(t, api, "default", "web", "exec", &v1.PodExecOptions{Command: []string{"sleep"}, Stdout: true})
			u.Host = cfg.Host[len("https://"):]
			ex, err := tr.new(cfg, u)
			if err != nil {
				t.Fatal(err)
			}
			streamed := make(chan error, 1)
			go func() {
				streamed <- ex.StreamWithContext(context.Background(), clientremote.StreamOptions{Stdout: io.Discard})
			}()
			select {
			case <-started:
			case err := <-streamed:
				t.Fatalf("exec ended before the command started: %v", err)
			}
			stop()
			waitAll(t, map[string]<-chan error{"Serve": served, "the client's stream": streamed})
			select {
			case <-killed:
			default:
				t.Error("Serve returned before the command was killed")
			}
		})
	}
}

// TestServeEndsPortForward: when Serve stops, a port forwarding session
// with a connection open ends: the client loses its connection to the
// pod, the pod's connection is closed, and Serve returns.
func TestServeEndsPortForward(t *testing.T) {
	for _, d := range dialers {
		t.Run(d.name, func(t *testing.T) {
			dialer := &fakeDialer{addr: echoServer(t)}
			api := newTestAPI(t, Config{DialPod: dialer.dial})
			api.store.SetPod(runningPod("default", "web", "app"))
			cfg, stop, served := serveOwn(t, api)
			u := api.clientset(t).CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("web").SubResource("portforward").URL()
			u.Host = cfg.Host[len("https://"):]
			dl, err := d.new(cfg, u)
			if err != nil {
				t.Fatal(err)
			}
			never, ready := make(chan struct{}), make(chan struct{})
			fw, err := portforward.NewOnAddresses(dl, []string{"127.0.0.1"}, []string{"0:8080"}, never, ready, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			forwarding := make(chan error, 1)
			go func() { forwarding <- fw.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-forwarding:
				t.Fatalf("port forwarding ended: %v", err)
			}
			ports, err := fw.GetPorts()
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			buf := make([]byte, 4)
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatalf("echo through the forwarded port: %v", err)
			}
			stop()
			closed := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(c)
				closed <- err
			}()
			waitAll(t, map[string]<-chan error{"Serve": served, "the client's forwarding": forwarding, "the local connection": closed})
		})
	}
}
