package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"time"
)

// headLimit is the largest response head (status line and headers) an
// HTTP probe reads.
const headLimit = 64 << 10

// firstBuffer is the size of an HTTP probe's response buffer at first: a
// health endpoint's whole response usually fits in it. It grows, once,
// for a larger one.
const firstBuffer = 1 << 10

// httpGet is the client of one httpGet probe. It speaks just the HTTP/1.1
// a probe needs, on a connection of its own each run, written and read on
// the caller's goroutine: a probe runs every second for every container,
// and net/http's client costs more CPU than the exchange itself (a
// transport's goroutines, a header map and buffers each run). The request
// for the probe's own URL is built once; the runs share a response buffer,
// so a httpGet serves one run at a time (its worker's).
type httpGet struct {
	dial dialFunc
	url  *url.URL
	// hostHeader is the Host header the probe's headers set, "" for the
	// URL's host; headers are its other header lines, each ending in CRLF.
	hostHeader string
	headers    string
	first      []byte // the request for url
	buf        []byte // the response of the current run
}

// response is what a probe needs of an HTTP response head.
type response struct {
	code     int
	location string
	// length is the body's Content-Length, -1 when the head gives none
	// (the body then ends with the connection, or is chunked).
	length  int64
	chunked bool
}

// request is the GET request for u.
func (g *httpGet) request(u *url.URL) []byte {
	host := g.hostHeader
	if host == "" {
		host = u.Host
	}
	return []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + host + "\r\n" + g.headers + "\r\n")
}

// get sends one GET for u and returns the response's status, its
// Location header and up to bodyLimit bytes of its body; the body is the
// httpGet's buffer, valid until the next run.
func (g *httpGet) get(ctx context.Context, u *url.URL) (code int, location string, body []byte, err error) {
	req := g.first
	if u != g.url {
		req = g.request(u)
	}
	conn, err := g.dial(ctx, "tcp", dialAddr(u))
	if err != nil {
		return 0, "", nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	// A cancelled probe must not wait for its deadline.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname()}) //nolint:gosec // as the kubelet: probes do not verify
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, "", nil, err
		}
		conn = tc
	}
	if _, err := conn.Write(req); err != nil {
		return 0, "", nil, err
	}
	resp, body, err := g.read(conn)
	if err != nil {
		return 0, "", nil, err
	}
	return resp.code, resp.location, body, nil
}

// dialAddr is the host:port a request for u connects to.
func dialAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// read reads a response from conn into g.buf: the head whole, then the
// body up to bodyLimit, which it returns.
func (g *httpGet) read(conn net.Conn) (response, []byte, error) {
	if g.buf == nil {
		g.buf = make([]byte, 0, firstBuffer)
	}
	buf := g.buf[:0]
	end := -1
	for end < 0 {
		if len(buf) == cap(buf) {
			if len(buf) >= headLimit {
				return response{}, nil, fmt.Errorf("response head longer than %d bytes", headLimit)
			}
			buf = g.grow(buf, 2*cap(buf))
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		end = headEnd(buf)
		if end < 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return response{}, nil, fmt.Errorf("connection closed before the response head ended: %w", io.ErrUnexpectedEOF)
			}
			return response{}, nil, err
		}
	}
	resp, err := parseHead(buf[:end])
	if err != nil {
		return response{}, nil, err
	}
	// The body's first bytes came with the head: move them to the front.
	n := copy(buf, buf[end:])
	buf = buf[:n]
	switch {
	case !bodyAllowed(resp.code):
		return resp, nil, nil
	case resp.chunked:
		// Rare for a probe: decoded by the standard library, on a reader
		// of its own.
		r := httputil.NewChunkedReader(io.MultiReader(bytes.NewReader(buf), conn))
		body, err := io.ReadAll(io.LimitReader(r, bodyLimit))
		return resp, body, err
	}
	want := int64(bodyLimit)
	if resp.length >= 0 {
		want = min(want, resp.length)
	}
	if int64(len(buf)) >= want {
		return resp, buf[:want], nil
	}
	if cap(buf) < int(want) {
		buf = g.grow(buf, int(want))
	}
	for int64(len(buf)) < want {
		n, err := conn.Read(buf[len(buf):want])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF) && resp.length < 0:
			// The body ends with the connection.
			return resp, buf, nil
		case errors.Is(err, io.EOF):
			return resp, nil, fmt.Errorf("connection closed after %d bytes of a %d-byte body: %w", len(buf), resp.length, io.ErrUnexpectedEOF)
		case err != nil:
			return resp, nil, err
		}
	}
	return resp, buf, nil
}

// grow returns buf with capacity n, kept as g.buf for the next runs.
func (g *httpGet) grow(buf []byte, n int) []byte {
	g.buf = make([]byte, len(buf), n)
	copy(g.buf, buf)
	return g.buf
}

// headEnd is the length of the response head at the start of b, the
// blank line that ends it included; -1 when b does not hold all of it.
func headEnd(b []byte) int {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		line := b[i : i+j]
		i += j + 1
		if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			return i
		}
	}
	return -1
}

// parseHead parses a response head: its status line, then header lines;
// line ends may be CRLF or LF, as net/http accepts.
func parseHead(head []byte) (response, error) {
	resp := response{length: -1}
	line, rest, _ := bytes.Cut(head, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	// HTTP/1.x SP 3DIGIT [SP reason]
	proto, status, _ := bytes.Cut(line, []byte(" "))
	if !bytes.HasPrefix(proto, []byte("HTTP/1.")) || len(status) < 3 || len(status) > 3 && status[3] != ' ' {
		return resp, fmt.Errorf("malformed HTTP status line %q", line)
	}
	for _, c := range status[:3] {
		if c < '0' || c > '9' {
			return resp, fmt.Errorf("malformed HTTP status code in %q", line)
		}
		resp.code = resp.code*10 + int(c-'0')
	}
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue // the blank line at the end, or one net/http would skip too
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Location")):
			resp.location = string(value)
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			resp.chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := parseLength(value)
			if err != nil {
				return resp, err
			}
			resp.length = n
		}
	}
	return resp, nil
}

// parseLength parses a Content-Length value.
func parseLength(v []byte) (int64, error) {
	if len(v) == 0 || len(v) > 18 {
		return 0, fmt.Errorf("bad Content-Length %q", v)
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad Content-Length %q", v)
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// bodyAllowed tells whether a response with status code may have a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(code int) bool {
	return code >= 200 && code != 204 && code != 304
}
