package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

const (
	// healthTimeout bounds one call of ServerConfig.Health.
	healthTimeout = 2 * time.Second
	// shutdownTimeout bounds how long Run waits for requests in flight.
	shutdownTimeout = 5 * time.Second
	// probeTimeout bounds the check for another server on the socket.
	probeTimeout = time.Second
)

// LogOptions select which part of a container's log to stream.
type LogOptions struct {
	// Follow keeps the stream open and sends new lines as they are written.
	Follow bool
	// TailLines is how many lines to send from the end of the log; negative
	// means the whole log.
	TailLines int64
	// Previous selects the log of the previous (terminated) instance of the
	// container instead of the current one.
	Previous bool
	// Timestamps prefixes each line with the time it was logged.
	Timestamps bool
	// SinceSeconds, when positive, leaves out the lines logged more than
	// that many seconds ago.
	SinceSeconds int64
	// SinceTime, when not zero, leaves out the lines logged before it.
	SinceTime time.Time
	// LimitBytes, when positive, ends the stream once it has sent that
	// many bytes.
	LimitBytes int64
}

// Since is the time before which lines are left out, zero for none: the
// later of SinceTime and now less SinceSeconds, as the kubelet takes them.
func (o LogOptions) Since(now time.Time) time.Time {
	var since time.Time
	if o.SinceSeconds > 0 {
		since = now.Add(-time.Duration(o.SinceSeconds) * time.Second)
	}
	if o.SinceTime.After(since) {
		since = o.SinceTime
	}
	return since
}

// LogOpener opens the log of one container of a pod (pod as
// "namespace/name"). It should return an error matching fs.ErrNotExist when
// there is no such log. The stream ends when ctx is cancelled.
type LogOpener func(ctx context.Context, pod, container string, opts LogOptions) (io.ReadCloser, error)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Socket is the path of the unix socket to listen on.
	Socket string
	// Group, if set, is the name or numeric ID of the group that owns the
	// socket; the socket is then mode 0660, otherwise 0600.
	Group string
	// Store is the state to serve.
	Store *Store
	// Health reports whether staticlet is healthy (nil error); nil means
	// always healthy. Each call gets a context with a 2 s deadline.
	Health func(ctx context.Context) error
	// Logs streams container logs; nil makes the log endpoint answer 501.
	Logs LogOpener
	// Exec runs commands in containers for POST /pods/{name}/exec; nil
	// makes that endpoint answer 501.
	Exec ExecFunc
	// Images lists the runtime's images for GET /images; nil lists none.
	Images ImageLister
	// Devices lists the node's CDI devices for GET /devices; nil lists
	// none.
	Devices DeviceLister
	// Stats samples the pods' usage for GET /stats/pods; nil makes it
	// answer 501.
	Stats StatsReader
	// Restart serves POST /pods/{name}/restart; nil makes it answer 501.
	Restart Restarter
	// Metrics, when set, serves GET /metrics (Prometheus' text format);
	// the status package knows nothing of what it holds.
	Metrics http.Handler
	// Instrument, when set, wraps the handler of each listener the server
	// serves, named by server: "socket", "healthz" (ServeHealthz) or
	// "metrics" (ServeMetrics); for counting requests.
	Instrument func(server string, h http.Handler) http.Handler
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
}

// Server serves the status API over HTTP on a unix socket.
type Server struct {
	cfg ServerConfig
	log *slog.Logger
	// sessions counts the exec sessions under way, which the HTTP server
	// no longer tracks once their connections are taken over.
	sessions sync.WaitGroup
}

// NewServer returns a server for cfg. It starts nothing: call Run.
func NewServer(cfg ServerConfig) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log}
}

// Handler returns the HTTP handler of the status API, for tests and for
// serving it elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /pods/{name}", s.pod)
	mux.HandleFunc("GET /pods/{name}/log", s.podLog)
	mux.HandleFunc("POST /pods/{name}/restart", s.restart)
	mux.HandleFunc("POST /pods/{name}/exec", s.podExec)
	mux.HandleFunc("GET /manifests", s.manifests)
	mux.HandleFunc("GET /configmaps", s.configMaps)
	mux.HandleFunc("GET /configmaps/{namespace}/{name}", s.configMap)
	mux.HandleFunc("GET /secrets", s.secrets)
	mux.HandleFunc("GET /secrets/{namespace}/{name}", s.secret)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /images", s.images)
	mux.HandleFunc("GET /devices", s.devices)
	mux.HandleFunc("GET /stats/pods", s.podStats)
	mux.HandleFunc("GET /node", s.node)
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	return mux
}

// Run listens on the socket and serves until ctx is cancelled, then shuts
// down gracefully and removes the socket. It creates the socket's directory
// (mode 0755) if needed and removes a stale socket file, but fails if another
// server answers on it.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.listen()
	if err != nil {
		return err
	}
	// Exec sessions outlive the HTTP server's shutdown; their requests'
	// contexts come from ctx, so ending it, even when Serve failed, ends
	// them.
	ctx, cancel := context.WithCancel(ctx)
	err = serve(ctx, ln, s.instrument("socket", s.Handler()), "status socket "+s.cfg.Socket, s.log)
	cancel()
	s.sessions.Wait()
	return err
}

// instrument is h wrapped by ServerConfig.Instrument, if set.
func (s *Server) instrument(server string, h http.Handler) http.Handler {
	if s.cfg.Instrument == nil {
		return h
	}
	return s.cfg.Instrument(server, h)
}

// listen prepares the socket path and listens on it with the configured
// owner and mode.
func (s *Server) listen() (net.Listener, error) {
	path := s.cfg.Socket
	gid := -1
	if s.cfg.Group != "" {
		g, err := lookupGroup(s.cfg.Group)
		if err != nil {
			return nil, fmt.Errorf("status socket %s: %w", path, err)
		}
		gid = g
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating directory of status socket: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on status socket: %w", err)
	}
	// Until the chmod below the socket has the umask's mode, which at worst
	// lets nobody but the owner connect (connecting needs write permission).
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("setting group of status socket: %w", err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("setting mode of status socket: %w", err)
	}
	return ln, nil
}

// removeStale removes a socket file left by a server that is gone, and
// fails if a server still answers on it or the path is not a socket.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking status socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("status socket %s exists and is not a socket", path)
	}
	conn, err := net.DialTimeout("unix", path, probeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("status socket %s is in use: is another staticlet running?", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("checking status socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale status socket: %w", err)
	}
	return nil
}

// lookupGroup resolves a group name or numeric ID.
func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("looking up group %q: %w", group, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("group %q has a non-numeric ID %q", group, g.Gid)
	}
	return gid, nil
}

// apiError is the JSON body of every error response with a JSON endpoint.
type apiError struct {
	Error string `json:"error"`
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encoding status response", "path", r.URL.Path, "err", err)
		code = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Error: "encoding response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, code int, format string, args ...any) {
	s.writeJSON(w, r, code, apiError{Error: fmt.Sprintf(format, args...)})
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, text+"\n")
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Health != nil {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := s.cfg.Health(ctx); err != nil {
			writeText(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	writeText(w, http.StatusOK, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Store.Ready() {
		writeText(w, http.StatusServiceUnavailable,
			"not ready: waiting for every manifest source to be read and the first reconcile pass")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// pods lists the pods, or with watch=true streams their changes (see
// watchPods); labelSelector selects pods by their labels in both.
func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	sel, err := parseSelector(r)
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	if s.serveWatch(w, r, func(bookmarks bool) { s.watchPods(w, r, sel, bookmarks) }) {
		return
	}
	list := v1.PodList{Items: selectPods(s.cfg.Store.Pods(), sel)}
	list.APIVersion, list.Kind = "v1", "PodList"
	s.writeJSON(w, r, http.StatusOK, &list)
}

// lookup resolves the {name} of the request and writes the error response
// when there is no single pod by that name.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (*v1.Pod, bool) {
	name := r.PathValue("name")
	p, matches := s.cfg.Store.find(name)
	if p != nil {
		return p, true
	}
	if len(matches) > 1 {
		keys := make([]string, len(matches))
		for i, k := range matches {
			keys[i] = k.String()
		}
		s.writeError(w, r, http.StatusConflict, "pod name %q is ambiguous (%s): use namespace/name",
			name, strings.Join(keys, ", "))
		return nil, false
	}
	s.writeError(w, r, http.StatusNotFound, "pod %q not found", name)
	return nil, false
}

// lookupContainer finds the pod a request names, and the container its
// container parameter names, if any; it answers the request itself when
// either is unknown. key is the pod's "namespace/name".
func (s *Server) lookupContainer(w http.ResponseWriter, r *http.Request) (p *v1.Pod, key, container string, ok bool) {
	p, ok = s.lookup(w, r)
	if !ok {
		return nil, "", "", false
	}
	key = p.Namespace + "/" + p.Name
	container = r.URL.Query().Get("container")
	if container != "" && !hasContainer(p, container) {
		s.writeError(w, r, http.StatusNotFound, "container %q not found in pod %s", container, key)
		return nil, "", "", false
	}
	return p, key, container, true
}

func (s *Server) pod(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.lookup(w, r); ok {
		s.writeJSON(w, r, http.StatusOK, p)
	}
}

func (s *Server) manifests(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, s.cfg.Store.Manifests())
}

// events lists the recent events, or with watch=true streams them (see
// watchEvents); pod selects one pod's. Each is a pod.Event with what the
// store adds to it (see RecordedEvent): its revision, series and pod UID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	podFilter := r.URL.Query().Get("pod")
	if s.serveWatch(w, r, func(bookmarks bool) { s.watchEvents(w, r, podFilter, bookmarks) }) {
		return
	}
	s.writeJSON(w, r, http.StatusOK, s.cfg.Store.RecordedEvents(podFilter))
}

func (s *Server) podLog(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Logs == nil {
		s.writeError(w, r, http.StatusNotImplemented, "logs are not served by this staticlet")
		return
	}
	opts, err := parseLogOptions(r)
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	_, key, container, ok := s.lookupOneContainer(w, r)
	if !ok {
		return
	}
	rc, err := s.cfg.Logs(r.Context(), key, container, opts)
	if errors.Is(err, fs.ErrNotExist) {
		s.writeError(w, r, http.StatusNotFound, "no log for container %q of pod %s: %v", container, key, err)
		return
	}
	if err != nil {
		s.log.Warn("opening container log", "pod", key, "container", container, "err", err)
		s.writeError(w, r, http.StatusInternalServerError, "opening log of container %q of pod %s: %v", container, key, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	// Flush after every read so that a follower sees lines as they come.
	rctl := http.NewResponseController(w)
	buf := make([]byte, 32*1024)
	for {
		n, rerr := rc.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return // the client went away
			}
			if err := rctl.Flush(); err != nil {
				return
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && r.Context().Err() == nil {
				s.log.Warn("reading container log", "pod", key, "container", container, "err", rerr)
			}
			return
		}
	}
}

// lookupOneContainer is lookupContainer for a request about one
// container: one that names none gets the pod's only app container, and
// is answered with the choices when there are several.
func (s *Server) lookupOneContainer(w http.ResponseWriter, r *http.Request) (p *v1.Pod, key, container string, ok bool) {
	p, key, container, ok = s.lookupContainer(w, r)
	if !ok || container != "" {
		return p, key, container, ok
	}
	if len(p.Spec.Containers) != 1 {
		names := make([]string, len(p.Spec.Containers))
		for i, c := range p.Spec.Containers {
			names[i] = c.Name
		}
		s.writeError(w, r, http.StatusBadRequest,
			"a container name must be specified for pod %s, choose one of: [%s]", key, strings.Join(names, " "))
		return nil, "", "", false
	}
	return p, key, p.Spec.Containers[0].Name, true
}

func hasContainer(p *v1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func parseLogOptions(r *http.Request) (LogOptions, error) {
	q := r.URL.Query()
	opts := LogOptions{TailLines: -1}
	var err error
	if v := q.Get("follow"); v != "" {
		if opts.Follow, err = strconv.ParseBool(v); err != nil {
			return opts, fmt.Errorf("invalid follow %q: want true or false", v)
		}
	}
	if v := q.Get("previous"); v != "" {
		if opts.Previous, err = strconv.ParseBool(v); err != nil {
			return opts, fmt.Errorf("invalid previous %q: want true or false", v)
		}
	}
	if v := q.Get("timestamps"); v != "" {
		if opts.Timestamps, err = strconv.ParseBool(v); err != nil {
			return opts, fmt.Errorf("invalid timestamps %q: want true or false", v)
		}
	}
	if v := q.Get("tailLines"); v != "" {
		if opts.TailLines, err = strconv.ParseInt(v, 10, 64); err != nil {
			return opts, fmt.Errorf("invalid tailLines %q: want an integer", v)
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		if opts.SinceSeconds, err = strconv.ParseInt(v, 10, 64); err != nil || opts.SinceSeconds < 1 {
			return opts, fmt.Errorf("invalid sinceSeconds %q: want an integer greater than 0", v)
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		if opts.SinceTime, err = time.Parse(time.RFC3339, v); err != nil {
			return opts, fmt.Errorf("invalid sinceTime %q: want an RFC 3339 time", v)
		}
		if opts.SinceSeconds > 0 {
			return opts, errors.New("at most one of `sinceTime` or `sinceSeconds` may be specified")
		}
	}
	if v := q.Get("limitBytes"); v != "" {
		if opts.LimitBytes, err = strconv.ParseInt(v, 10, 64); err != nil || opts.LimitBytes < 1 {
			return opts, fmt.Errorf("invalid limitBytes %q: want an integer greater than 0", v)
		}
	}
	return opts, nil
}
