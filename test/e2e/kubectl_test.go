package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// kubectlPod serves a page on 127.0.0.1:8080 inside the pod, is Ready once
// it does, and writes a line to its log.
const kubectlPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: localhost/busybox:test
    command: [sh, -c, "mkdir -p /www && echo hello from web > /www/index.html && echo serving && exec httpd -f -p 127.0.0.1:8080 -h /www"]
    readinessProbe:
      exec: {command: [wget, -q, -O, /dev/null, "http://127.0.0.1:8080/"]}
      periodSeconds: 1
`

// kubectl runs the real kubectl against one staticlet.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

// run runs kubectl with args and returns its combined output.
func (k kubectl) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs kubectl and fails the test when it fails.
func (k kubectl) must(args ...string) string {
	k.t.Helper()
	out, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestKubectl drives a real kubectl 1.30 against staticlet's API: get
// (wide, all namespaces), nodes, the node's Lease in describe node,
// api-resources, wait, a watch through a restart and a removal, a refused
// delete, and the output options that staticlet's own get prints the same
// way.
func TestKubectl(t *testing.T) {
	e := harness.NewEnv(t)
	d, _, kubeconfig := startWithAPI(t, e)
	k := kubectl{t: t, bin: kubetools.Kubectl(t), kubeconfig: kubeconfig}
	e.Write("web.yaml", kubectlPod)
	web := "web-" + harness.TestNode
	d.WaitPod(web, 60*time.Second, "web running", harness.Running)

	out := k.must("wait", "--for=condition=Ready", "pod/"+web, "--timeout=60s")
	if !strings.Contains(out, "pod/"+web+" condition met") {
		t.Errorf("kubectl wait = %q", out)
	}
	out = k.must("get", "pods", "-A", "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAMESPACE") || !strings.Contains(lines[0], "NODE") {
		t.Fatalf("kubectl get pods -A -o wide:\n%s", out)
	}
	fields := strings.Fields(lines[1])
	if fields[0] != "default" || fields[1] != web || fields[2] != "1/1" || fields[3] != "Running" || !strings.Contains(lines[1], harness.TestNode) {
		t.Errorf("kubectl get pods -A -o wide row = %q", lines[1])
	}
	out = k.must("get", "nodes")
	if !strings.Contains(out, harness.TestNode) || !strings.Contains(out, "Ready") {
		t.Errorf("kubectl get nodes:\n%s", out)
	}
	out = k.must("describe", "node", harness.TestNode)
	if !strings.Contains(out, "HolderIdentity:  "+harness.TestNode) || strings.Contains(out, "RenewTime:       <unset>") ||
		strings.Contains(out, "Failed to get lease") {
		t.Errorf("kubectl describe node's Lease:\n%s", out)
	}
	out = k.must("api-resources")
	if !strings.Contains(out, "pods") || !strings.Contains(out, "Pod") || !strings.Contains(out, "nodes") {
		t.Errorf("kubectl api-resources:\n%s", out)
	}

	// What staticlet's own get prints for the same pods, option by option.
	for _, opts := range [][]string{
		{"-o", "jsonpath={.items[*].metadata.name}"},
		{"-o", "name"},
		{"-o", "custom-columns=NAME:.metadata.name,IP:.status.podIP,NODE:.spec.nodeName"},
		{"-o", "custom-columns=NAME:.metadata.name", "--no-headers"},
		{"-o", "go-template={{range .items}}{{.metadata.name}} {{.status.phase}}{{\"\\n\"}}{{end}}"},
	} {
		want := k.must(append([]string{"get", "pods"}, opts...)...)
		got, err := d.CLI(append([]string{"get", "pods"}, opts...)...)
		if err != nil || got != want {
			t.Errorf("staticlet get pods %s = %q, %v; kubectl prints %q", strings.Join(opts, " "), got, err, want)
		}
	}

	out, err := k.run("delete", "pod", web)
	if err == nil || !strings.Contains(out, filepath.Join(e.Manifest, "web.yaml")) || !strings.Contains(out, "MethodNotAllowed") {
		t.Errorf("kubectl delete pod = %v:\n%s\nwant a refusal naming the manifest", err, out)
	}
	if _, err := d.Pod(web); err != nil {
		t.Errorf("the pod after a refused delete: %v", err)
	}

	// get -w through a restart (the container exits after 2 s and
	// restarts) and the removal of the manifest.
	var watchOut harness.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := exec.CommandContext(ctx, k.bin, "--kubeconfig", kubeconfig, "get", "pods", "-w", "--output-watch-events")
	w.Stdout, w.Stderr = &watchOut, &watchOut
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = w.Wait() }()
	harness.WaitFor(t, 30*time.Second, "kubectl get -w to list the pod", func() (bool, string) {
		return strings.Contains(watchOut.String(), web), watchOut.String()
	})
	e.Write("blink.yaml", exiterPod("blink", "Always", "0"))
	blink := "blink-" + harness.TestNode
	harness.WaitFor(t, 90*time.Second, "kubectl get -w to show blink restarted", func() (bool, string) {
		for _, line := range strings.Split(watchOut.String(), "\n") {
			f := strings.Fields(line)
			if len(f) >= 5 && f[0] == "MODIFIED" && f[1] == blink && f[4] != "0" {
				return true, ""
			}
		}
		return false, watchOut.String()
	})
	e.Remove("blink.yaml")
	harness.WaitFor(t, 60*time.Second, "kubectl get -w to show blink deleted", func() (bool, string) {
		return containsFields(watchOut.String(), "DELETED", blink), watchOut.String()
	})
}

// containsFields reports whether a line of out starts with the fields.
func containsFields(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
