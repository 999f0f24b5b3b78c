package status

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
)

// Restarter restarts container of a pod (pod as "namespace/name") now, or
// every app container of the pod when container is empty, resetting their
// restart backoff (staticlet restart). It should return an error matching
// fs.ErrNotExist when there is no such pod or container; any other error
// is a refusal (the pod or container is not to run again), told to the
// client as a conflict, unless ctx ended.
type Restarter func(ctx context.Context, pod, container string) error

// restart serves POST /pods/{name}/restart?container=.
func (s *Server) restart(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Restart == nil {
		s.writeError(w, r, http.StatusNotImplemented, "restarts are not served by this staticlet")
		return
	}
	p, key, container, ok := s.lookupContainer(w, r)
	if !ok {
		return
	}
	err := s.cfg.Restart(r.Context(), key, container)
	switch {
	case err == nil:
		s.writeJSON(w, r, http.StatusOK, RestartReply{Namespace: p.Namespace, Name: p.Name, Container: container})
	case errors.Is(err, fs.ErrNotExist):
		s.writeError(w, r, http.StatusNotFound, "%v", err)
	case r.Context().Err() != nil, errors.Is(err, context.DeadlineExceeded):
		s.writeError(w, r, http.StatusServiceUnavailable, "%v", err)
	default:
		s.writeError(w, r, http.StatusConflict, "%v", err)
	}
}

// RestartReply is the answer to a restart: the pod, and the container
// restarted (empty: every app container).
type RestartReply struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Container string `json:"container,omitempty"`
}

// Restart asks staticlet to restart container of a pod now (every app
// container when container is empty), resetting their restart backoff.
// The error wraps ErrNotFound for an unknown pod or container.
func (c *Client) Restart(ctx context.Context, podName, container string) (RestartReply, error) {
	path := "/pods/" + url.PathEscape(podName) + "/restart"
	if container != "" {
		path += "?" + url.Values{"container": {container}}.Encode()
	}
	var reply RestartReply
	// The server's refusals say what was asked already.
	err := c.sendJSON(ctx, http.MethodPost, path, &reply)
	return reply, err
}
