package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	criremote "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"

	"github.com/staticlet/staticlet/internal/status"
)

// pods/exec, pods/attach and pods/portforward serve what the apiserver
// passes on to the kubelet: the request is checked here as the apiserver
// checks it (the pod, the container), then the connection is upgraded and
// served as the kubelet serves it. SPDY and the WebSocket protocols up to
// v4 are k8s.io/cri-streaming's, the kubelet's own code; v5 over
// WebSocket (what kubectl tries first) is served in wsexec.go from the
// same pieces the apiserver uses.

const (
	// streamIdleTimeout closes a session in which nothing was sent either
	// way for this long, as the kubelet's streaming server does.
	streamIdleTimeout = 4 * time.Hour
	// streamCreationTimeout bounds how long an SPDY client takes to open
	// the streams it asked for.
	streamCreationTimeout = criremote.DefaultStreamCreationTimeout
)

// streamVerbs are the verbs discovery lists for pods/exec, attach and
// portforward: the apiserver's (their GET and POST upgrade alike).
var streamVerbs = []string{verbCreate, verbGet}

// streamSubresources are the pods' streaming subresources.
func (s *Server) streamSubresources() map[string]subresource {
	return map[string]subresource{
		"exec":        {kind: "PodExecOptions", verbs: streamVerbs, serve: s.streaming(s.serveExec)},
		"attach":      {kind: "PodAttachOptions", verbs: streamVerbs, serve: s.streaming(s.serveAttach)},
		"portforward": {kind: "PodPortForwardOptions", verbs: streamVerbs, serve: s.streaming(s.servePortForward)},
	}
}

// streamOptions are the parameters of an exec or attach request, as the
// apiserver reads PodExecOptions and PodAttachOptions.
type streamOptions struct {
	container string
	command   []string
	criremote.Options
}

// parseStreamOptions reads the query of an exec or attach request. With
// a TTY there is no stderr: it is the terminal's output.
func parseStreamOptions(r *http.Request) (streamOptions, error) {
	q := r.URL.Query()
	o := streamOptions{container: q.Get("container"), command: q["command"]}
	for _, b := range []struct {
		name string
		to   *bool
	}{{"stdin", &o.Stdin}, {"stdout", &o.Stdout}, {"stderr", &o.Stderr}, {"tty", &o.TTY}} {
		v := q.Get(b.name)
		if v == "" {
			continue
		}
		val, err := strconv.ParseBool(v)
		if err != nil {
			return o, apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q: want true or false", b.name, v))
		}
		*b.to = val
	}
	if o.TTY {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// runningContainer returns the containerd ID of container name of p when
// its status says it runs; otherwise the kubelet's error.
func runningContainer(p *v1.Pod, name string) (string, error) {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name && cs.State.Running != nil && cs.ContainerID != "" {
				_, id, _ := strings.Cut(cs.ContainerID, "://")
				return id, nil
			}
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container not found (%q): it is not running", name))
}

// streamTarget checks an exec or attach request as the apiserver and the
// kubelet do, and returns its options, pod and running container's ID.
func (s *Server) streamTarget(r *http.Request, req request) (streamOptions, *v1.Pod, string, error) {
	opts, err := parseStreamOptions(r)
	if err != nil {
		return opts, nil, "", err
	}
	p := s.podNamed(req.namespace, req.name)
	if p == nil {
		return opts, nil, "", apierrors.NewNotFound(v1.Resource("pods"), req.name)
	}
	if opts.container, err = pickContainer(p, opts.container); err != nil {
		return opts, nil, "", err
	}
	id, err := runningContainer(p, opts.container)
	return opts, p, id, err
}

// notServed is the answer to a streaming request that staticlet was not
// configured to serve.
func notServed(what string) error {
	return apierrors.NewServiceUnavailable(what + " is not served by this staticlet")
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, req request) {
	if s.cfg.Exec == nil {
		s.writeStatus(w, r, notServed("pods/exec"))
		return
	}
	opts, p, id, err := s.streamTarget(r, req)
	if err == nil && len(opts.command) == 0 {
		err = apierrors.NewBadRequest("you must specify at least one command for the container")
	}
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	ex := executor{exec: s.cfg.Exec, id: id, asked: opts.Options}
	key := p.Namespace + "/" + p.Name
	s.log.Info("exec in container", "pod", key, "container", opts.container, "command", opts.command, "tty", opts.TTY)
	if offersV5(r) {
		s.serveV5(w, r, opts, func(ctx context.Context, st streams) *apierrors.StatusError {
			return exitStatus(ex.ExecInContainer(ctx, key, string(p.UID), opts.container, opts.command,
				st.stdin, st.stdout, st.stderr, opts.TTY, st.resize, 0))
		})
		return
	}
	criremote.ServeExec(w, r, ex, key, string(p.UID), opts.container, opts.command, &opts.Options,
		streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// offersV5 tells whether r is a WebSocket upgrade offering the v5
// protocol, which cri-streaming does not speak.
func offersV5(r *http.Request) bool {
	if !wsstream.IsWebSocketRequest(r) {
		return false
	}
	return headerHas(r.Header, "Sec-WebSocket-Protocol", remotecommand.StreamProtocolV5Name)
}

// headerHas tells whether one of the comma-separated tokens of header name
// is token.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(t) == token {
				return true
			}
		}
	}
	return false
}

// executor runs commands in one container through an ExecFunc, as the
// kubelet's streaming runtime does for cri-streaming.
type executor struct {
	exec  status.ExecFunc
	id    string // the container's containerd ID
	asked criremote.Options
}

// ExecInContainer runs cmd in the container with the session's streams
// and returns, for an exit code other than 0, the error the kubelet's
// runtime returns, which the session reports as NonZeroExitCode.
func (e executor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan criremote.TerminalSize, _ time.Duration) error {
	opts := status.ExecOptions{Command: cmd, TTY: tty}
	// The command gets the streams the client asked for, nil interfaces
	// otherwise (cri-streaming's WebSocket sessions pass the channels
	// ignored too).
	if in != nil && e.asked.Stdin {
		opts.Stdin = in
	}
	if out != nil && e.asked.Stdout {
		opts.Stdout = out
	}
	if errOut != nil && e.asked.Stderr {
		opts.Stderr = errOut
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if resize != nil {
		sizes := make(chan status.TermSize)
		opts.Resize = sizes
		wg.Go(func() { forwardSizes(ctx, resize, sizes) })
	}
	code, err := e.exec(ctx, e.id, opts)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("error executing command %v, exit code %d", cmd, code), Code: code}
	}
	return nil
}

// forwardSizes passes the client's terminal sizes on until ctx ends or
// the client sends no more.
func forwardSizes(ctx context.Context, from <-chan criremote.TerminalSize, to chan<- status.TermSize) {
	for {
		select {
		case sz, ok := <-from:
			if !ok {
				return
			}
			select {
			case to <- status.TermSize{Cols: sz.Width, Rows: sz.Height}:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// exitStatus is the Status an exec session ends with, the kubelet's:
// success, NonZeroExitCode with the code as the ExitCode cause, or an
// internal error.
func exitStatus(err error) *apierrors.StatusError {
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusSuccess}}
	case errors.As(err, &exit) && exit.Exited():
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exit),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(exit.ExitStatus())},
			}},
		}}
	default:
		return apierrors.NewInternalError(fmt.Errorf("error executing command in container: %w", err))
	}
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request, req request) {
	if s.cfg.Logs == nil {
		s.writeStatus(w, r, notServed("pods/attach"))
		return
	}
	opts, p, _, err := s.streamTarget(r, req)
	if err == nil && opts.Stdin && containerStdin(p, opts.container) {
		err = apierrors.NewBadRequest(fmt.Sprintf(
			"container %s asks for stdin, but staticlet does not keep containers' input open: attach without stdin (-i), or use kubectl exec",
			opts.container))
	}
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	// The log is opened before the upgrade, so that a failure is an
	// answer of its own; it is followed from its end: what the container
	// writes from now on.
	key := p.Namespace + "/" + p.Name
	out, err := s.cfg.Logs(r.Context(), key, opts.container, status.LogOptions{Follow: true, TailLines: 0})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = apierrors.NewBadRequest(fmt.Sprintf("container not found (%q): %v", opts.container, err))
		}
		s.writeStatus(w, r, err)
		return
	}
	defer out.Close()
	// The stdin drained (below) ends when the session's connection is
	// closed, which ServeAttach and serveV5 do before they return.
	var drains sync.WaitGroup
	defer drains.Wait()
	a := attacher{log: out, asked: opts.Options, drains: &drains}
	if offersV5(r) {
		s.serveV5(w, r, opts, func(ctx context.Context, st streams) *apierrors.StatusError {
			return attachStatus(a.AttachContainer(ctx, key, string(p.UID), opts.container, st.stdin, st.stdout, st.stderr, opts.TTY, st.resize))
		})
		return
	}
	criremote.ServeAttach(w, r, a, key, string(p.UID), opts.container, &opts.Options,
		streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// containerStdin tells whether container name of p asks for stdin.
func containerStdin(p *v1.Pod, name string) bool {
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			if c.Name == name {
				return c.Stdin
			}
		}
	}
	return false
}

// attacher attaches to a container's output by following its log.
// Staticlet's containers write to the log daemon, which merges their
// stdout and stderr in one log: both come on the session's stdout (or
// stderr when the client asked for that alone). A container that does
// not ask for stdin has none, as under the kubelet: the client's input is
// read and dropped, so that it never holds up the session.
type attacher struct {
	log    io.Reader
	asked  criremote.Options
	drains *sync.WaitGroup
}

// AttachContainer copies the log to the client until the container stops
// writing (its log ends) or the client goes away.
func (a attacher) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errOut io.WriteCloser,
	_ bool, _ <-chan criremote.TerminalSize) error {
	if in != nil && a.asked.Stdin {
		a.drains.Go(func() { _, _ = io.Copy(io.Discard, in) })
	}
	var to io.Writer
	switch {
	case out != nil && a.asked.Stdout:
		to = out
	case errOut != nil && a.asked.Stderr:
		to = errOut
	default:
		// Stdin alone was asked for, on a container that has none:
		// nothing to do.
		return nil
	}
	if _, err := io.Copy(to, a.log); err != nil && ctx.Err() == nil {
		return fmt.Errorf("streaming the container's output: %w", err)
	}
	return nil
}
