package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// userAgent is the User-Agent of HTTP and gRPC probes: the kubelet's form,
// which some servers look for.
const userAgent = "kube-probe/1.37"

// bodyLimit is how much of an HTTP probe's response body is read, as the
// kubelet reads.
const bodyLimit = 10 << 10

// maxRedirects is how many same-host redirects an HTTP probe follows.
const maxRedirects = 10

// check runs one probe attempt. A nil error is success, with warning set
// when the success deserves a warning event; an error is a failure whose
// text is the probe's output.
type check func(ctx context.Context) (warning string, err error)

// dialFunc dials like net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// newCheck returns the check for probe pr of target t.
func newCheck(rt Runtime, t pod.ProbeTarget, pr *v1.Probe) (check, error) {
	switch {
	case pr.Exec != nil:
		return execCheck(rt, t.ContainerID, pr.Exec.Command, timeoutOf(pr)), nil
	case pr.HTTPGet != nil:
		port, err := pod.ContainerPort(pr.HTTPGet.Port, t.Container)
		if err != nil {
			return nil, err
		}
		host, dial := target(rt, t, pr.HTTPGet.Host)
		return httpCheck(pr.HTTPGet, host, port, dial), nil
	case pr.TCPSocket != nil:
		port, err := pod.ContainerPort(pr.TCPSocket.Port, t.Container)
		if err != nil {
			return nil, err
		}
		host, dial := target(rt, t, pr.TCPSocket.Host)
		return tcpCheck(net.JoinHostPort(host, strconv.Itoa(port)), dial), nil
	case pr.GRPC != nil:
		host, dial := target(rt, t, "")
		svc := ""
		if pr.GRPC.Service != nil {
			svc = *pr.GRPC.Service
		}
		return grpcCheck(net.JoinHostPort(host, strconv.Itoa(int(pr.GRPC.Port))), svc, dial), nil
	}
	return nil, errors.New("probe has no handler")
}

// timeoutOf is the probe's timeout; the API's default is one second.
func timeoutOf(pr *v1.Probe) time.Duration {
	if pr.TimeoutSeconds <= 0 {
		return time.Second
	}
	return time.Duration(pr.TimeoutSeconds) * time.Second
}

// target is the host a network probe reaches and how to dial it. A host
// that is set is dialled from the node, as the kubelet does. With none,
// the probe goes to the pod: its IP when it has one, 127.0.0.1 under
// hostNetwork, else 127.0.0.1 dialled inside the pod's network namespace.
func target(rt Runtime, t pod.ProbeTarget, host string) (string, dialFunc) {
	// A probe's connection lives for one exchange: no keep-alive to set up.
	d := &net.Dialer{FallbackDelay: -1, KeepAlive: -1}
	switch {
	case host != "":
		return host, d.DialContext
	case t.PodIP != "":
		return t.PodIP, d.DialContext
	case t.Pod.Spec.HostNetwork:
		return "127.0.0.1", d.DialContext
	}
	id, sb := t.ContainerID, t.SandboxID
	return "127.0.0.1", func(ctx context.Context, network, addr string) (net.Conn, error) {
		return rt.DialPod(ctx, id, sb, network, addr)
	}
}

// execCheck runs cmd in container id: exit code 0 is success. The
// command is killed after timeout.
func execCheck(rt Runtime, id string, cmd []string, timeout time.Duration) check {
	return func(ctx context.Context) (string, error) {
		// The timeout bounds the command; the margin lets containerd's own
		// calls around it finish.
		ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
		defer cancel()
		code, out, err := rt.Exec(ctx, id, cmd, timeout)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return "", fmt.Errorf("command %q timed out", strings.Join(cmd, " "))
		case err != nil:
			return "", err
		case code != 0:
			if len(out) == 0 {
				return "", fmt.Errorf("command %q exited with %d", strings.Join(cmd, " "), code)
			}
			return "", errors.New(string(out))
		}
		return "", nil
	}
}

// httpCheck sends g's GET to host:port: a status from 200 to 399 is
// success. As with the kubelet, certificates are not verified, each probe
// opens a new connection, redirects to the same host are followed (at most
// 10) and one to another host is a success with a warning.
func httpCheck(g *v1.HTTPGetAction, host string, port int, dial dialFunc) check {
	u := pod.HTTPGetURL(g, host, port)
	if u.Path == "" {
		u.Path = "/"
	}
	c := &httpGet{dial: dial, url: u, headers: fixedHeaders(g.HTTPHeaders)}
	for _, h := range g.HTTPHeaders {
		if http.CanonicalHeaderKey(h.Name) == "Host" {
			c.hostHeader = h.Value
		}
	}
	c.first = c.request(u)
	return func(ctx context.Context) (string, error) {
		cur := u
		for redirects := 0; ; redirects++ {
			code, location, body, err := c.get(ctx, cur)
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return "", fmt.Errorf("GET %s: %w", cur.Redacted(), ctx.Err())
				case errors.Is(err, os.ErrDeadlineExceeded):
					// The socket's deadline is the probe's timeout.
					return "", fmt.Errorf("GET %s: %w", cur.Redacted(), context.DeadlineExceeded)
				}
				return "", fmt.Errorf("GET %s: %w", cur.Redacted(), err)
			}
			if code >= http.StatusMultipleChoices && code < http.StatusBadRequest && location != "" {
				next, err := cur.Parse(location)
				if err != nil || next.Hostname() != u.Hostname() {
					return fmt.Sprintf("Probe terminated redirects, Response body: %s", body), nil
				}
				if redirects+1 >= maxRedirects {
					return "", fmt.Errorf("stopped after %d redirects", maxRedirects)
				}
				cur = next
				continue
			}
			switch {
			case code >= http.StatusOK && code < http.StatusBadRequest:
				return "", nil
			default:
				return "", fmt.Errorf("HTTP probe failed with statuscode: %d", code)
			}
		}
	}
}

// fixedHeaders are the header lines of every request of an HTTP probe
// but Host, each ending in CRLF: those of the probe, then the kubelet's
// User-Agent and Accept where the probe sets none, and Connection: close.
func fixedHeaders(hs []v1.HTTPHeader) string {
	header := http.Header{}
	for _, h := range hs {
		if http.CanonicalHeaderKey(h.Name) != "Host" {
			header.Add(h.Name, h.Value)
		}
	}
	if header.Get("User-Agent") == "" {
		header.Set("User-Agent", userAgent)
	}
	if header.Get("Accept") == "" {
		header.Set("Accept", "*/*")
	}
	header.Set("Connection", "close")
	var b strings.Builder
	_ = header.Write(&b) // a strings.Builder does not fail
	return b.String()
}

// tcpCheck succeeds when a connection to addr opens.
func tcpCheck(addr string, dial dialFunc) check {
	return func(ctx context.Context) (string, error) {
		conn, err := dial(ctx, "tcp", addr)
		if err != nil {
			return "", err
		}
		_ = conn.Close()
		return "", nil
	}
}

// grpcCheck asks the grpc.health.v1 service at addr about service (empty:
// the server as a whole): SERVING is success.
func grpcCheck(addr, service string, dial dialFunc) check {
	return func(ctx context.Context) (string, error) {
		conn, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUserAgent(userAgent),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }))
		if err != nil {
			return "", fmt.Errorf("failed to connect to service at %q: %w", addr, err)
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(false))
		if err != nil {
			st, _ := status.FromError(err)
			switch st.Code() {
			case codes.Unimplemented:
				return "", fmt.Errorf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
			case codes.DeadlineExceeded:
				return "", fmt.Errorf("timeout: health rpc did not complete within the probe's timeout")
			}
			return "", fmt.Errorf("error: health rpc probe failed: %w", err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return "", fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus().String())
		}
		return "", nil
	}
}
