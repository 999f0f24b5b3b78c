package health

import (
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkHTTPGet is the cost of one httpGet probe run, client and
// test server together.
func BenchmarkHTTPGet(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, port := hostPort(b, srv.Listener.Addr().String())
	c := &v1.Container{Name: "app"}
	pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port)}}}
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
