package health

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseHead(t *testing.T) {
	tests := []struct {
		name    string
		head    string
		want    response
		wantErr string
	}{
		{name: "200", head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", want: response{code: 200, length: 3}},
		{name: "no reason", head: "HTTP/1.0 204\r\n\r\n", want: response{code: 204, length: -1}},
		{name: "LF line ends", head: "HTTP/1.1 302 Found\nLocation: /ok\n\n", want: response{code: 302, location: "/ok", length: -1}},
		{name: "names in any case, values trimmed", head: "HTTP/1.1 301 Moved\r\nlOcAtIoN:  http://a.test/x \r\ncontent-length:0\r\n\r\n",
			want: response{code: 301, location: "http://a.test/x", length: 0}},
		{name: "chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", want: response{code: 200, length: -1, chunked: true}},
		{name: "other headers ignored", head: "HTTP/1.1 500 Oops\r\nX-A: b:c\r\nServer: x\r\n\r\n", want: response{code: 500, length: -1}},
		{name: "not HTTP", head: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: "malformed HTTP status line"},
		{name: "HTTP/2 status line", head: "HTTP/2 200\r\n\r\n", wantErr: "malformed HTTP status line"},
		{name: "short code", head: "HTTP/1.1 20 OK\r\n\r\n", wantErr: "malformed HTTP status line"},
		{name: "long code", head: "HTTP/1.1 2000 OK\r\n\r\n", wantErr: "malformed HTTP status line"},
		{name: "code not digits", head: "HTTP/1.1 2x0 OK\r\n\r\n", wantErr: "malformed HTTP status code"},
		{name: "bad length", head: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: "bad Content-Length"},
		{name: "empty length", head: "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", wantErr: "bad Content-Length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := headEnd([]byte(tt.head + "body")); n != len(tt.head) {
				t.Fatalf("headEnd(%q) = %d, want %d", tt.head+"body", n, len(tt.head))
			}
			got, err := parseHead([]byte(tt.head))
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("parseHead(%q) = %+v, %v; want error containing %q", tt.head, got, err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Errorf("parseHead(%q) = %+v, %v; want %+v", tt.head, got, err, tt.want)
			}
		})
	}
}

func TestHeadEndIncomplete(t *testing.T) {
	for _, b := range []string{"", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\nA: b\r\n\r"} {
		if n := headEnd([]byte(b)); n != -1 {
			t.Errorf("headEnd(%q) = %d, want -1", b, n)
		}
	}
}

// rawServer serves each connection with serve, on a loopback listener
// closed at the end of the test, and returns its port and the requests'
// heads.
func rawServer(t *testing.T, serve func(c net.Conn)) (int, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		heads []string
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 0, 4096)
				for headEnd(buf) < 0 {
					n, err := c.Read(buf[len(buf):cap(buf)])
					buf = buf[:len(buf)+n]
					if err != nil {
						return
					}
				}
				mu.Lock()
				heads = append(heads, string(buf))
				mu.Unlock()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	_, port := hostPort(t, ln.Addr().String())
	return port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), heads...)
	}
}

// write is a serve function that writes resp, then holds the connection
// open until the client closes it when hold is set.
func write(resp string, hold bool) func(net.Conn) {
	return func(c net.Conn) {
		if _, err := c.Write([]byte(resp)); err != nil || !hold {
			return
		}
		_, _ = c.Read(make([]byte, 1)) // until the client closes
	}
}

func TestHTTPGetResponses(t *testing.T) {
	big := strings.Repeat("b", bodyLimit+50)
	longHead := "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("h", 3*firstBuffer) + "\r\nContent-Length: 2\r\n\r\nok"
	tests := []struct {
		name    string
		serve   func(net.Conn)
		wantErr string
		warning string // prefix, after "Probe terminated redirects, Response body: "
	}{
		{name: "body framed by length, connection held open", serve: write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", true)},
		{name: "body ends with the connection", serve: write("HTTP/1.0 200 OK\r\n\r\nok\n", false)},
		{name: "204 without a length, connection held open", serve: write("HTTP/1.1 204 No Content\r\n\r\n", true)},
		{name: "chunked, connection held open", serve: write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", true)},
		{name: "body over the limit, connection held open", serve: write("HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(big))+"\r\n\r\n"+big, true)},
		{name: "head longer than the first buffer", serve: write(longHead, false)},
		{name: "head over the limit", serve: write("HTTP/1.1 200 OK\r\nX-Long: "+strings.Repeat("h", headLimit)+"\r\n\r\n", false), wantErr: "response head longer than"},
		{name: "closed before any response", serve: func(net.Conn) {}, wantErr: "connection closed before the response head ended"},
		{name: "closed in the head", serve: write("HTTP/1.1 200 OK\r\nContent-Le", false), wantErr: "connection closed before the response head ended"},
		{name: "closed in the body", serve: write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok", false), wantErr: "connection closed after 2 bytes of a 10-byte body"},
		{name: "not HTTP", serve: write("SSH-2.0-OpenSSH_9.6\r\n\r\n", false), wantErr: "malformed HTTP status line"},
		{name: "server error", serve: write("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", true), wantErr: "statuscode: 503"},
		{name: "redirect elsewhere with a chunked body", warning: "moved",
			serve: write("HTTP/1.1 302 Found\r\nLocation: http://elsewhere.test/\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nmov\r\n2\r\ned\r\n0\r\n\r\n", true)},
		{name: "redirect elsewhere with a large body", warning: big[:bodyLimit],
			serve: write("HTTP/1.1 301 Moved\r\nLocation: http://elsewhere.test/\r\n\r\n"+big, false)},
		{name: "too slow", serve: func(c net.Conn) { _, _ = c.Read(make([]byte, 1)) }, wantErr: "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, _ := rawServer(t, tt.serve)
			pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(port)}}, TimeoutSeconds: 1}
			warning, err := run(t, &fakeRuntime{}, targetFor(&v1.Container{Name: "app"}, true), pr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("probe = %v, want error containing %q", err, tt.wantErr)
			}
			const prefix = "Probe terminated redirects, Response body: "
			if tt.warning == "" && warning != "" || tt.warning != "" && warning != prefix+tt.warning {
				t.Errorf("warning = %.80q (%d bytes), want %.80q", warning, len(warning), tt.warning)
			}
		})
	}
}

func TestHTTPGetRequest(t *testing.T) {
	// The request as the server reads it: the kubelet's headers where the
	// probe sets none, and the probe's own; the same on every run, and
	// for a same-host redirect but for the path.
	ok, okHeads := rawServer(t, write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false))
	loop, loopHeads := rawServer(t, write("HTTP/1.1 302 Found\r\nLocation: /next?a=b\r\nContent-Length: 0\r\n\r\n", false))
	head := func(path, host, headers string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + headers + "\r\n"
	}
	defaults := "Accept: */*\r\nConnection: close\r\nUser-Agent: " + userAgent + "\r\n"
	okHost, loopHost := "127.0.0.1:"+strconv.Itoa(ok), "127.0.0.1:"+strconv.Itoa(loop)
	next := head("/next?a=b", loopHost, defaults)
	tests := []struct {
		name  string
		get   v1.HTTPGetAction
		heads func() []string
		want  []string // one run's requests
	}{
		{name: "defaults", get: v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(ok)}, heads: okHeads,
			want: []string{head("/healthz", okHost, defaults)}},
		{name: "no path", get: v1.HTTPGetAction{Port: intstr.FromInt(ok)}, heads: okHeads,
			want: []string{head("/", okHost, defaults)}},
		{name: "the probe's headers", heads: okHeads,
			get: v1.HTTPGetAction{Path: "/q?x=1", Port: intstr.FromInt(ok), HTTPHeaders: []v1.HTTPHeader{
				{Name: "host", Value: "example.test"}, {Name: "User-Agent", Value: "mine"}, {Name: "X-Probe", Value: "a"}, {Name: "x-probe", Value: "b"}}},
			want: []string{head("/q?x=1", "example.test", "Accept: */*\r\nConnection: close\r\nUser-Agent: mine\r\nX-Probe: a\r\nX-Probe: b\r\n")}},
		{name: "same-host redirects", get: v1.HTTPGetAction{Path: "/first", Port: intstr.FromInt(loop)}, heads: loopHeads,
			want: []string{head("/first", loopHost, defaults), next, next, next, next, next, next, next, next, next}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &tt.get}, TimeoutSeconds: 1}
			chk, err := newCheck(&fakeRuntime{}, targetFor(&v1.Container{Name: "app"}, true), pr)
			if err != nil {
				t.Fatal(err)
			}
			for run := range 2 {
				n := len(tt.heads())
				_, _ = chk(t.Context()) // the redirects loop: the requests are what counts
				if got := tt.heads()[n:]; !equal(got, tt.want) {
					t.Errorf("run %d: requests =\n\t%q\nwant\n\t%q", run, got, tt.want)
				}
			}
		})
	}
}
