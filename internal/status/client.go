package status

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Errors that Client errors wrap, to be told apart with errors.Is.
var (
	// ErrNotFound says the server does not know the pod (or log).
	ErrNotFound = errors.New("not found")
	// ErrNotRunning says nothing answers on the socket (it does not exist
	// or refuses connections), or the server went away while answering,
	// as before staticlet starts or while it restarts.
	ErrNotRunning = errors.New("staticlet is not running")
	// ErrNotReady, from Ready, says staticlet answers but has not yet read
	// every source and issued its first reconcile pass.
	ErrNotReady = errors.New("staticlet is not ready")
)

// defaultClientTimeout bounds a request whose ctx has no deadline; log
// streams are not bounded.
const defaultClientTimeout = 10 * time.Second

// Client talks to a staticlet's status socket. It is safe for concurrent
// use.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the status socket at the given path. It
// does not connect until a method is called.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Pods returns every pod staticlet runs.
func (c *Client) Pods(ctx context.Context) (*v1.PodList, error) {
	return c.PodsMatching(ctx, "")
}

// Pod returns one pod by "name" or "namespace/name" (see Store.Pod). The
// error wraps ErrNotFound when there is no such pod.
func (c *Client) Pod(ctx context.Context, name string) (*v1.Pod, error) {
	var p v1.Pod
	if err := c.getJSON(ctx, "/pods/"+url.PathEscape(name), &p); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("pod %q %w", name, ErrNotFound)
		}
		return nil, fmt.Errorf("getting pod %q: %w", name, err)
	}
	return &p, nil
}

// Manifests returns the result of reading each manifest file.
func (c *Client) Manifests(ctx context.Context) ([]Manifest, error) {
	var m []Manifest
	if err := c.getJSON(ctx, "/manifests", &m); err != nil {
		return nil, fmt.Errorf("listing manifests: %w", err)
	}
	return m, nil
}

// Events returns the recent events, oldest first: all of them when podName
// is empty, else those of the pod ("name" or "namespace/name").
func (c *Client) Events(ctx context.Context, podName string) ([]pod.Event, error) {
	recorded, err := c.RecordedEvents(ctx, podName)
	if err != nil {
		return nil, err
	}
	events := make([]pod.Event, len(recorded))
	for i := range recorded {
		events[i] = recorded[i].Event
	}
	return events, nil
}

// RecordedEvents is Events as the store records them, with each one's
// revision, series and pod UID (zero from a server that does not serve
// them): what CoreEvent makes an Event of.
func (c *Client) RecordedEvents(ctx context.Context, podName string) ([]RecordedEvent, error) {
	path := "/events"
	if podName != "" {
		path += "?pod=" + url.QueryEscape(podName)
	}
	var events []RecordedEvent
	if err := c.getJSON(ctx, path, &events); err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	return events, nil
}

// Health returns nil when staticlet reports itself healthy, else an error
// with the reason.
func (c *Client) Health(ctx context.Context) error {
	msg, err := c.getText(ctx, "/healthz")
	if err != nil {
		return fmt.Errorf("checking health: %w", err)
	}
	if msg != "" {
		return fmt.Errorf("staticlet is unhealthy: %s", msg)
	}
	return nil
}

// Ready returns nil once staticlet has read every source and issued its
// first reconcile pass, else an error saying what it waits for.
func (c *Client) Ready(ctx context.Context) error {
	msg, err := c.getText(ctx, "/readyz")
	if err != nil {
		return fmt.Errorf("checking readiness: %w", err)
	}
	if msg != "" {
		return &kindError{msg: "staticlet is " + msg, kind: ErrNotReady}
	}
	return nil
}

// Logs opens the log stream of a container of a pod; container may be empty
// for a pod with one container. The caller must close the stream; with
// opts.Follow it lasts until ctx is cancelled or the server stops.
func (c *Client) Logs(ctx context.Context, podName, container string, opts LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if container != "" {
		q.Set("container", container)
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.TailLines >= 0 {
		q.Set("tailLines", strconv.FormatInt(opts.TailLines, 10))
	}
	if opts.SinceSeconds > 0 {
		q.Set("sinceSeconds", strconv.FormatInt(opts.SinceSeconds, 10))
	}
	if !opts.SinceTime.IsZero() {
		q.Set("sinceTime", opts.SinceTime.Format(time.RFC3339))
	}
	if opts.LimitBytes > 0 {
		q.Set("limitBytes", strconv.FormatInt(opts.LimitBytes, 10))
	}
	path := "/pods/" + url.PathEscape(podName) + "/log"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("getting logs of pod %q: %w", podName, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, fmt.Errorf("getting logs of pod %q: %w", podName, responseError(resp))
	}
	return resp.Body, nil
}

// do sends a GET request; the caller closes the body.
func (c *Client) do(ctx context.Context, path string) (*http.Response, error) {
	return c.send(ctx, http.MethodGet, path)
}

// send sends a request with no body; the caller closes the response's.
func (c *Client) send(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://staticlet"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	return resp, nil
}

// transportError turns a failure to connect into advice, and marks the
// failures that mean no staticlet answers with ErrNotRunning; other errors
// pass through.
func (c *Client) transportError(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		// The server closed the connection under a request: it stops.
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return &kindError{msg: err.Error(), kind: ErrNotRunning, err: err}
		}
		return err
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("cannot reach staticlet at %s: permission denied: run as root or as a member of the socket's group (%w)", c.socket, op)
	}
	err = fmt.Errorf("cannot reach staticlet at %s: is it running? (%w)", c.socket, op)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return &kindError{msg: err.Error(), kind: ErrNotRunning, err: err}
	}
	return err
}

// withDefaultTimeout bounds ctx when it has no deadline of its own.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultClientTimeout)
}

// sendOK sends a request with no body and returns the response if it is
// 200 OK, else the server's error; the caller closes the body.
func (c *Client) sendOK(ctx context.Context, method, path string) (*http.Response, error) {
	resp, err := c.send(ctx, method, path)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	return resp, nil
}

func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	return c.sendJSON(ctx, http.MethodGet, path, out)
}

// sendJSON sends a request with no body and decodes the JSON answer into
// out.
func (c *Client) sendJSON(ctx context.Context, method, path string, out any) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	resp, err := c.sendOK(ctx, method, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}

// getText returns "" for a 200 response, else the server's message; err
// is set only when there is no response.
func (c *Client) getText(ctx context.Context, path string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	resp, err := c.do(ctx, path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return "", nil
	}
	return responseError(resp).Error(), nil
}

// responseError makes an error of a non-200 response: the server's message
// (the JSON error or the plain text body), wrapping ErrNotFound for 404.
func responseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	msg := strings.TrimSpace(string(body))
	var apiErr apiError
	if json.Unmarshal(body, &apiErr) == nil && apiErr.Error != "" {
		msg = apiErr.Error
	}
	if msg == "" {
		msg = resp.Status
	}
	if resp.StatusCode == http.StatusNotFound {
		return &kindError{msg: msg, kind: ErrNotFound}
	}
	return errors.New(msg)
}

// kindError is an error with its own message that matches one of the
// sentinel errors above, and wraps its cause, if any.
type kindError struct {
	msg  string
	kind error // ErrNotFound, ErrNotRunning or ErrNotReady
	err  error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }
func (e *kindError) Unwrap() error        { return e.err }

// ConfigMaps returns the ConfigMaps in force, in namespace ns (every
// namespace when empty).
func (c *Client) ConfigMaps(ctx context.Context, ns string) (*v1.ConfigMapList, error) {
	var list v1.ConfigMapList
	if err := c.getJSON(ctx, "/configmaps"+namespaceQuery(ns), &list); err != nil {
		return nil, fmt.Errorf("listing configmaps: %w", err)
	}
	return &list, nil
}

// ConfigMap returns the ConfigMap ns/name; the error wraps ErrNotFound
// when there is none.
func (c *Client) ConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	var cm v1.ConfigMap
	if err := c.getJSON(ctx, objectPath("configmaps", ns, name), &cm); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err // the server's message names it
		}
		return nil, fmt.Errorf("getting configmap %s/%s: %w", ns, name, err)
	}
	return &cm, nil
}

// Secrets returns the Secrets in force, in namespace ns (every namespace
// when empty), without their data: AnnotationSecretKeys has their keys
// and sizes.
func (c *Client) Secrets(ctx context.Context, ns string) (*v1.SecretList, error) {
	var list v1.SecretList
	if err := c.getJSON(ctx, "/secrets"+namespaceQuery(ns), &list); err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	return &list, nil
}

// Secret returns the Secret ns/name without its data; with a digestKey
// (16 to 64 random bytes) it carries AnnotationSecretDigests. The error
// wraps ErrNotFound when there is none.
func (c *Client) Secret(ctx context.Context, ns, name string, digestKey []byte) (*v1.Secret, error) {
	path := objectPath("secrets", ns, name)
	if digestKey != nil {
		path += "?digestKey=" + hex.EncodeToString(digestKey)
	}
	var sec v1.Secret
	if err := c.getJSON(ctx, path, &sec); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err // the server's message names it
		}
		return nil, fmt.Errorf("getting secret %s/%s: %w", ns, name, err)
	}
	return &sec, nil
}

func namespaceQuery(ns string) string {
	if ns == "" {
		return ""
	}
	return "?namespace=" + url.QueryEscape(ns)
}

func objectPath(resource, ns, name string) string {
	return "/" + resource + "/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}
