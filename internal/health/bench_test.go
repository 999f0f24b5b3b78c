package health

import (
	"net"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkHTTPGet is the cost of one httpGet probe run against a server
// that, as busybox httpd does, answers each connection with one response
// and closes it. The server takes little of the figure, and allocates
// nothing per connection, so that allocs/op are the probe's.
func BenchmarkHTTPGet(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go serveCanned(ln, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
	_, port := hostPort(b, ln.Addr().String())
	c := &v1.Container{Name: "app"}
	pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(port)}}}
	chk, err := newCheck(&fakeRuntime{}, targetFor(c, true), pr)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chk(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// serveCanned answers every connection ln accepts with resp once the
// request's head came, then closes it, until ln is closed.
func serveCanned(ln net.Listener, resp string) {
	buf := make([]byte, 4096)
	out := []byte(resp)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		n := 0
		for headEnd(buf[:n]) < 0 && n < len(buf) {
			k, err := conn.Read(buf[n:])
			n += k
			if err != nil {
				break
			}
		}
		_, _ = conn.Write(out)
		_ = conn.Close()
	}
}
