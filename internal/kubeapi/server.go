package kubeapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/staticlet/staticlet/internal/status"
)

// healthTimeout bounds one call of Config.Health.
const healthTimeout = 2 * time.Second

// Config configures a Server.
type Config struct {
	// Store is the state to serve.
	Store *status.Store
	// NodeName is the node's name: the Node served and the pods' node.
	NodeName string
	// Version is staticlet's version, served in /version's gitVersion
	// beside the Kubernetes API version it implements.
	Version string
	// Health reports whether staticlet is healthy (nil error), for
	// /healthz and /livez; nil means always healthy.
	Health func(ctx context.Context) error
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
	// Stats samples the pods' usage for metrics.k8s.io's pods (kubectl
	// top pod); nil serves no pod metrics.
	Stats status.StatsReader
	// NodeUsage samples the node's usage for metrics.k8s.io's nodes
	// (kubectl top node); nil serves no node metrics.
	NodeUsage NodeUsage
	// Devices lists the node's CDI devices, counted in the node's
	// capacity and allocatable as the status socket's node does; nil
	// adds none.
	Devices func() status.DeviceList
	// Logs opens a container's log for pods/log, and for pods/attach,
	// which follows it from its end; nil leaves pods/log out and answers
	// pods/attach 503.
	Logs status.LogOpener
	// Exec runs commands in containers, for pods/exec; nil answers 503.
	Exec status.ExecFunc
	// DialPod connects to a pod's port inside its network namespace, for
	// pods/portforward; nil answers 503.
	DialPod PodDialer
	// Heartbeat is when staticlet was last seen alive (its reconcile
	// loop's last turn): the node's Lease is renewed at it; zero is not
	// yet. Nil renews the Lease at the clock, as if always alive.
	Heartbeat func() time.Time
	// LeaseDurationSeconds is the node Lease's leaseDurationSeconds (the
	// kubelet's nodeLeaseDurationSeconds), renewed every quarter of it;
	// 0 is the kubelet's default, 40.
	LeaseDurationSeconds int32

	// leaseRenew is how often the node's Lease is renewed; 0 is a
	// quarter of its duration, as the kubelet's. Tests shorten it.
	leaseRenew time.Duration
}

// Server serves the Kubernetes API. Create it with New.
type Server struct {
	cfg       Config
	log       *slog.Logger
	codecs    codecs
	resources []*resource
	// sessions are the exec, attach and port forwarding sessions.
	sessions sessions
	// lease is the renewal of the node's Lease.
	lease nodeLease
	// started is when the server was made: the Lease's creation when the
	// node has none.
	started time.Time
}

// New returns a server for cfg. It starts nothing: call Serve.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, codecs: newCodecs(), started: time.Now()}
	s.resources = append(s.coreResources(), s.objectResources()...)
	s.resources = append(s.resources, s.metricsResources()...)
	s.resources = append(s.resources, s.reviewResources()...)
	s.resources = append(s.resources, s.eventResources()...)
	s.resources = append(s.resources, s.leaseResources()...)
	s.addPodLog()
	return s
}

// Handler returns the API's HTTP handler, which authenticates every
// request by the client certificate its TLS connection verified, then
// authorizes it by the certificate's groups (authorize).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", s.version)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /livez", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api", s.apiVersions)
	mux.HandleFunc("GET /apis", s.apiGroups)
	mux.HandleFunc("/api/", s.serveResource)
	mux.HandleFunc("/apis/", s.serveResource)
	s.newOpenAPI().register(mux, s.notFound)
	mux.HandleFunc("/", s.notFound)
	return s.authenticate(s.authorizeRequests(mux))
}

// Serve serves the API over TLS on ln until ctx is cancelled, then shuts
// down, giving requests in flight a few seconds. It closes ln. tlsConfig
// must verify client certificates it is given (the server answers 401 to
// a client that gave none).
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// Shutdown neither waits for nor closes the connections that exec,
	// attach and port forwarding took over: it has them closed, and Serve
	// waits for their handlers, which end with them.
	srv.RegisterOnShutdown(s.sessions.closeAll)
	err := status.RunHTTP(ctx, srv, func() error { return srv.ServeTLS(ln, "", "") }, "Kubernetes API on "+ln.Addr().String())
	s.sessions.closeAll()
	s.sessions.wait()
	return err
}

// authenticate answers 401 to a request whose connection presented no
// verified client certificate, and passes the others to next.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := requestUser(r); !ok {
			s.writeStatus(w, r, unauthorized())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Health != nil {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := s.cfg.Health(ctx); err != nil {
			writeText(w, http.StatusInternalServerError, "[-]staticlet failed: "+err.Error()+"\nhealthz check failed")
			return
		}
	}
	writeText(w, http.StatusOK, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Store.Ready() {
		writeText(w, http.StatusInternalServerError,
			"[-]manifests failed: waiting for every manifest source to be read and the first reconcile pass\nreadyz check failed")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprint(w, text)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeStatus(w, r, notFound("the server could not find the requested resource"))
}
