package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

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
	script := dependentScript(name, url)
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

// dependentScript is the shell script of a dependentPod called name that
// needs what answers at url.
func dependentScript(name, url string) string {
	// Not wget -T: the timeout option crashes busybox 1.35's wget.
	up := "timeout 2 wget -q -O /dev/null " + url
	return fmt.Sprintf(`if %[1]s; then echo up > /out/%[2]s.start; else echo down > /out/%[2]s.start; fi; `+
		`trap 'if %[1]s; then echo up > /out/%[2]s.term; exit 0; fi; echo down > /out/%[2]s.term; while true; do sleep 1; done' TERM; `+
		`: > %[3]s; while true; do sleep 1 & wait $!; done`, up, name, harness.TrappedFile)
}

// waitAllGone waits until the pods of names (metadata.name) are gone.
func waitAllGone(d *harness.Daemon, names ...string) {
	d.T.Helper()
	for _, n := range names {
		waitGone(d, n+"-"+harness.TestNode)
	}
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
// first, while what it needs still answers; without the annotation, a pod
// whose command names the port another serves stops first too.
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
		waitAllGone(d, names...)
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
	t.Run("by port", func(t *testing.T) {
		port := harness.FreePort(t)
		e.Write("db2.yaml", backendPod("db2", port))
		up("db2")
		e.Write("api2.yaml", frontendPod("api2", "", port, out))
		up("api2")
		gone("db2", "api2")
		if got := read("api2.term"); got != "up" {
			t.Errorf("the frontend found the backend %s at SIGTERM, want up: it names the backend's port, so it stops first", got)
		}
	})
}

// slowStopPod is a hostNetwork pod that needs 3s to exit after SIGTERM.
func slowStopPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: localhost/busybox:test
    command: [sh, -c, "trap 'sleep 3; exit 0' TERM; : > %s; while true; do sleep 1 & wait $!; done"]
`, name, harness.TrappedFile)
}

// TestRemoveUnrelatedTogether: twelve pods that need 3s each to stop and
// need nothing of each other, removed together, stop at once: none waits
// for another. The time they took is logged (make bench measures it).
func TestRemoveUnrelatedTogether(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("slow%d", i+1))
		e.Write(names[i]+".yaml", slowStopPod(names[i]))
	}
	for _, n := range names {
		p := d.WaitPod(n+"-"+harness.TestNode, time.Minute, n+" running", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		})
		e.WaitTrapped(p)
	}
	removed := time.Now()
	for _, n := range names {
		e.Remove(n + ".yaml")
	}
	waitAllGone(d, names...)
	t.Logf("twelve pods that need 3s to stop gone %.2fs after their manifests were removed", time.Since(removed).Seconds())
	if out := d.Out.String(); strings.Contains(out, "stops after others") || strings.Contains(out, "not gone in time") {
		t.Errorf("unrelated pods waited for each other to stop:\n%s", out)
	}
}
