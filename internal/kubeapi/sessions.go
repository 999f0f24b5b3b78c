package kubeapi

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
)

// sessions are the connections that exec, attach and port forwarding take
// over from the HTTP server, which Shutdown neither waits for nor closes.
// Serve closes them when it stops, which ends their sessions, and waits
// for their handlers.
type sessions struct {
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	// wg counts the handlers under way; Add happens under mu while not
	// closed, so never after Wait has begun.
	wg sync.WaitGroup
}

// begin registers a streaming handler and returns the response writer it
// must use, whose hijacked connection is closed when the server stops;
// done unregisters it. ok is false once the server is stopping.
func (ss *sessions) begin(w http.ResponseWriter) (_ http.ResponseWriter, done func(), ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, nil, false
	}
	ss.wg.Add(1)
	tw := &trackedWriter{ResponseWriter: w, ss: ss}
	return tw, func() {
		tw.release()
		ss.wg.Done()
	}, true
}

// closeAll closes the connections taken over, and refuses new sessions.
func (ss *sessions) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for c := range ss.conns {
		c.Close()
	}
}

// wait waits for the handlers under way; call it after closeAll.
func (ss *sessions) wait() { ss.wg.Wait() }

// trackedWriter is a response writer whose hijacked connection the
// sessions hold.
type trackedWriter struct {
	http.ResponseWriter
	ss   *sessions
	conn net.Conn
}

func (t *trackedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(t.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	t.ss.mu.Lock()
	defer t.ss.mu.Unlock()
	if t.ss.closed {
		c.Close()
		return nil, nil, errors.New("the server is stopping")
	}
	if t.ss.conns == nil {
		t.ss.conns = map[net.Conn]bool{}
	}
	t.ss.conns[c] = true
	t.conn = c
	return c, brw, nil
}

// release forgets the hijacked connection, which its handler has closed.
func (t *trackedWriter) release() {
	if t.conn == nil {
		return
	}
	t.ss.mu.Lock()
	defer t.ss.mu.Unlock()
	delete(t.ss.conns, t.conn)
}

// streaming wraps a streaming subresource's handler so that its session
// belongs to the server.
func (s *Server) streaming(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, req request) {
		tw, done, ok := s.sessions.begin(w)
		if !ok {
			s.writeStatus(w, r, notServed("a new session while the server stops"))
			return
		}
		defer done()
		h(tw, r, req)
	}
}
