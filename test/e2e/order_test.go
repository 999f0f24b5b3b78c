package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// backendPod serves HTTP on 127.0.0.1:port until SIGTERM, Ready once it
// answers.
func backendPod(name string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  containers:
  - name: server
    image: localhost/busybox:test
    command: [sh, -c, "mkdir -p /www; echo ok > /www/index.html; trap 'exit 0' TERM; httpd -f -p 127.0.0.1:%d -h /www & : > %s; wait"]
    readinessProbe:
      httpGet: {host: 127.0.0.1, port: %d, path: /index.html}
      periodSeconds: 1
`, name, port, harness.TrappedFile, port)
}

// frontendPod, like a kube-apiserver, needs the backend on port: see
// dependentPod.
func frontendPod(name, after string, port int, out string) string {
	return dependentPod(name, "default", after, fmt.Sprintf("http://127.0.0.1:%d/index.html", port), out)
}

// dependentPod needs what answers at url: it writes to out/NAME.start
// whether url answered when it started, and on SIGTERM to out/NAME.term
// whether it answers then; without it, it hangs on SIGTERM until it is
// killed, as a kube-apiserver with a request in flight to a dead etcd
// does. With after set, it starts after the pods after names.
func dependentPod(name, namespace, after, url, out string) string {
	annotations := ""
	if after != "" {
		annotations = fmt.Sprintf("  annotations:\n    staticlet.io/after: %s\n", after)
	}
	// Not wget -T: the timeout option crashes busybox 1.35's wget.
	up := "timeout 2 wget -q -O /dev/null " + url
	script := fmt.Sprintf(`if %[1]s; then echo up > /out/%[2]s.start; else echo down > /out/%[2]s.start; fi; `+
		`trap 'if %[1]s; then echo up > /out/%[2]s.term; exit 0; fi; echo down > /out/%[2]s.term; while true; do sleep 1; done' TERM; `+
		`: > %[3]s; while true; do sleep 1 & wait $!; done`, up, name, harness.TrappedFile)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
%sspec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: localhost/busybox:test
    command: [sh, -c, %q]
    volumeMounts: [{name: out, mountPath: /out}]
  volumes:
  - {name: out, hostPath: {path: %s, type: DirectoryOrCreate}}
`, name, namespace, annotations, script, out)
}

// readOut returns what a dependentPod wrote to out/name.
func readOut(t *testing.T, out, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatalf("reading what the dependent pod wrote: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// TestStartAndStopOrder: a pod that needs another starts once that one is
// Ready (staticlet.io/after) and, when both are removed together, stops
// first, while what it needs still answers; without the annotation, pods
// removed together stop in the reverse of the order they became Ready.
func TestStartAndStopOrder(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	out := filepath.Join(e.Dir, "out")
	read := func(name string) string { t.Helper(); return readOut(t, out, name) }
	full := func(name string) string { return name + "-" + harness.TestNode }
	up := func(names ...string) {
		t.Helper()
		for _, n := range names {
			p := d.WaitPod(full(n), time.Minute, n+" ready", podReady)
			e.WaitTrapped(p)
		}
	}
	gone := func(names ...string) {
		t.Helper()
		for _, n := range names {
			e.Remove(n + ".yaml")
		}
		for _, n := range names {
			harness.WaitFor(t, time.Minute, n+" gone", func() (bool, string) {
				_, err := d.Pod(full(n))
				return err != nil, fmt.Sprint(err)
			})
		}
	}

	t.Run("after", func(t *testing.T) {
		port := harness.FreePort(t)
		// Written together; the frontend waits for the backend.
		e.Write("api.yaml", frontendPod("api", "db", port, out))
		e.Write("db.yaml", backendPod("db", port))
		up("db", "api")
		if got := read("api.start"); got != "up" {
			t.Errorf("the frontend found the backend %s when it started, want up: it starts after it is Ready", got)
		}
		gone("db", "api")
		if got := read("api.term"); got != "up" {
			t.Errorf("the frontend found the backend %s at SIGTERM, want up: it stops first", got)
		}
	})
	t.Run("ready order", func(t *testing.T) {
		port := harness.FreePort(t)
		e.Write("db2.yaml", backendPod("db2", port))
		up("db2")
		e.Write("api2.yaml", frontendPod("api2", "", port, out))
		up("api2")
		gone("db2", "api2")
		if got := read("api2.term"); got != "up" {
			t.Errorf("the frontend found the backend %s at SIGTERM, want up: it became Ready last, so it stops first", got)
		}
	})
}
