package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/moby/sys/signal"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// hookBodyLimit is how much of an httpGet hook's response is read.
const hookBodyLimit = 10 << 10

// RunHook runs lifecycle handler h (exec or httpGet) of container id, which
// runs req.Container of req.Pod in sandbox req.Sandbox (only its ID is
// needed). It returns nil when the handler succeeds, else why not; an exec
// command's output is part of the error. Sleep handlers are the caller's:
// they need no runtime. ctx bounds the whole hook.
//
// An httpGet with no host goes to the pod itself: 127.0.0.1 under
// hostNetwork, else 127.0.0.1 dialled from inside the pod's network
// namespace (staticlet gives pods no address of their own yet). A host
// that is set is dialled from the node, as the kubelet does.
func (r *Runtime) RunHook(ctx context.Context, id string, req pod.ContainerRequest, h *v1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		res, err := r.Exec(ctx, id, h.Exec.Command, 0)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), res.ExitCode, res.Output)
		}
		return nil
	case h.HTTPGet != nil:
		return r.hookHTTPGet(ctx, id, req, h.HTTPGet)
	}
	return errors.New("invalid handler: only exec and httpGet run in the runtime")
}

// hookHTTPGet sends the GET of an httpGet hook; a 2xx or 3xx answer is
// success. Redirects are not followed.
func (r *Runtime) hookHTTPGet(ctx context.Context, id string, req pod.ContainerRequest, g *v1.HTTPGetAction) error {
	port, err := pod.ContainerPort(g.Port, req.Container)
	if err != nil {
		return err
	}
	host, nsPath := g.Host, ""
	if host == "" {
		host = "127.0.0.1"
		if !req.Pod.Spec.HostNetwork {
			if nsPath, err = r.podNetNS(ctx, id, req.Sandbox.ID); err != nil {
				return err
			}
		}
	}
	u := pod.HTTPGetURL(g, host, port)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("building the request for %s: %w", u, err)
	}
	for _, hd := range g.HTTPHeaders {
		if http.CanonicalHeaderKey(hd.Name) == "Host" {
			hreq.Host = hd.Value
			continue
		}
		hreq.Header.Add(hd.Name, hd.Value)
	}
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", "kube-lifecycle/staticlet")
	}
	if hreq.Header.Get("Accept") == "" {
		hreq.Header.Set("Accept", "*/*")
	}
	dialer := &net.Dialer{FallbackDelay: -1}
	dial := dialer.DialContext
	if nsPath != "" {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := netns.Do(nsPath, func() error {
				var err error
				conn, err = dialer.DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		}
	}
	c := &http.Client{
		Transport: &http.Transport{
			DialContext:       dial,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet: hooks do not verify
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, hookBodyLimit))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: HTTP status %d", u, resp.StatusCode)
	}
	return nil
}

// podNetNS is the network namespace of the pod container id belongs to:
// its sandbox's pin, or the container's own process when it is not pinned.
func (r *Runtime) podNetNS(ctx context.Context, id, sandboxID string) (string, error) {
	if dir := r.sandboxDir(sandboxID); sandboxID != "" && netns.Pinned(dir, netns.Net) {
		return netns.Path(dir, netns.Net), nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return "", fmt.Errorf("loading container %s: %w", id, err)
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	return fmt.Sprintf("/proc/%d/ns/net", t.Pid()), nil
}

// stopSignalOf is the signal that stops container c, for its label:
// lifecycle.stopSignal, else the image's STOPSIGNAL, else SIGTERM. An
// image's signal this system does not know falls back to SIGTERM.
func (r *Runtime) stopSignalOf(c *v1.Container, img *images.Resolved) string {
	if l := c.Lifecycle; l != nil && l.StopSignal != nil && *l.StopSignal != "" {
		if _, err := signal.ParseSignal(string(*l.StopSignal)); err == nil {
			return string(*l.StopSignal)
		}
		r.cfg.Logger.Warn("unknown lifecycle.stopSignal; using the image's or SIGTERM", "container", c.Name, "signal", *l.StopSignal)
	}
	if img.StopSignal != "" {
		if _, err := signal.ParseSignal(img.StopSignal); err == nil {
			return img.StopSignal
		}
		r.cfg.Logger.Warn("unknown STOPSIGNAL in image; using SIGTERM", "container", c.Name, "image", img.ID, "signal", img.StopSignal)
	}
	return "SIGTERM"
}
