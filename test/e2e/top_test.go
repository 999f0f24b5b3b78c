package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const topPods = `apiVersion: v1
kind: Pod
metadata:
  name: busy
  labels: {app: busy}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: loop
    image: localhost/busybox:test
    command: ["sh", "-c", "while :; do :; done"]
    # Half a core at most: a spinning loop must not starve the node (the
    # test VM's emulated CPUs, and containerd and runc with them).
    resources: {limits: {cpu: 500m}}
  - name: fill
    image: localhost/busybox:test
    # 20 MiB in a tmpfs: its pages are charged to the container's cgroup.
    command: ["sh", "-c", "dd if=/dev/zero of=/mem/fill bs=1048576 count=20 && exec sleep 100000"]
    volumeMounts:
    - {name: mem, mountPath: /mem}
  volumes:
  - {name: mem, emptyDir: {medium: Memory}}
`

// TestTopPods runs a pod with a container that spins and one that fills
// a Memory emptyDir, and an idle pod without labels, and waits until top pods shows both, per pod and per
// container, as kubectl top prints them; a name or a label selector
// picks pods, and the status socket serves the figures as JSON.
func TestTopPods(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("top.yaml", topPods)
	e.Write("idle.yaml", strings.NewReplacer("NAME", "idle", "RESOURCES", "").Replace(resourcesPod))
	busy, idle := "busy-"+harness.TestNode, "idle-"+harness.TestNode
	d.WaitPod(busy, 30*time.Second, "busy running", harness.Running)
	d.WaitPod(idle, 30*time.Second, "idle running", harness.Running)

	// CPU and memory, once the loop has run a while and dd has written.
	const minCPU, minMemory = 200, 15 // millicores, MiB
	var last string
	harness.WaitFor(t, 60*time.Second, "top pods --containers to show the loop's CPU and the tmpfs's memory", func() (bool, string) {
		out, err := d.CLI("top", "pods", "--containers")
		last = out
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		rows := topRows(out)
		if h := rows["POD NAME"]; h == nil || strings.Join(h, " ") != "CPU(cores) MEMORY(bytes)" {
			return false, "header: " + out
		}
		loop, fill := rows[busy+" loop"], rows[busy+" fill"]
		ok := loop != nil && fill != nil && rows[idle+" main"] != nil &&
			milli(loop[0]) >= minCPU && mebi(fill[1]) >= minMemory
		return ok, out
	})
	t.Logf("top pods --containers:\n%s", last)
	harness.WaitFor(t, 30*time.Second, "top pods to show busy's CPU and memory", func() (bool, string) {
		out, err := d.CLI("top", "pods")
		last = out
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		rows := topRows(out)
		p := rows[busy]
		ok := rows["NAME"] != nil && p != nil && rows[idle] != nil &&
			milli(p[0]) >= minCPU && mebi(p[1]) >= minMemory
		return ok, out
	})
	t.Logf("top pods:\n%s", last)

	// A name, or a selector, picks pods.
	for _, tt := range []struct {
		name string
		args []string
		want []string // rows' first columns, after the header
	}{
		{"by name", []string{"top", "pods", "idle"}, []string{idle}},
		{"by full name and namespace", []string{"top", "pods", busy, "-n", "default"}, []string{busy}},
		{"by selector", []string{"top", "pods", "-l", "!app"}, []string{idle}},
		{"containers by selector", []string{"top", "pods", "-l", "app in (busy)", "--containers"}, []string{busy, busy}},
		{"no pod of the namespace", []string{"top", "pods", "-n", "kube-system"}, nil},
	} {
		out, err := d.CLI(tt.args...)
		if err != nil {
			t.Errorf("%s: %v: %s", tt.name, err, out)
			continue
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")[1:]
		var got []string
		for _, l := range lines {
			got = append(got, strings.Fields(l)[0])
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: staticlet %s printed\n%s\nwant rows of %v", tt.name, strings.Join(tt.args, " "), out, tt.want)
		}
	}
	if out, err := d.CLI("top", "pods", "nosuch"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("top pods nosuch = %v, %q; want a not found error", err, out)
	}

	// The socket's JSON, over a window of the request's.
	list, err := d.Client().PodStats(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatalf("PodStats: %v", err)
	}
	window, err := time.ParseDuration(list.Window)
	if err != nil || window < 300*time.Millisecond || list.Time.IsZero() || len(list.Pods) != 2 {
		t.Errorf("PodStats(300ms) = %+v (window %v)", list, err)
	}
	for _, p := range list.Pods {
		if p.Namespace != "default" || p.MemoryWorkingSetBytes == 0 {
			t.Errorf("PodStats: pod %+v, want one of default with memory", p)
		}
	}

	// The loop stops with its pod, before the test's clean-up.
	e.Remove("top.yaml")
	harness.WaitFor(t, 30*time.Second, "busy gone", func() (bool, string) {
		_, err := d.Pod(busy)
		return err != nil, fmt.Sprint(err)
	})
}

// topRows maps each row of a top table, by its first columns (the POD and
// NAME, or the NAME), to the CPU and memory columns.
func topRows(out string) map[string][]string {
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 {
			rows[strings.Join(f[:len(f)-2], " ")] = f[len(f)-2:]
		}
	}
	return rows
}

// milli parses kubectl's "250m"; -1 if it is not that.
func milli(s string) int { return unitCount(s, "m") }

// mebi parses kubectl's "20Mi"; -1 if it is not that.
func mebi(s string) int { return unitCount(s, "Mi") }

// unitCount parses a whole number followed by unit; -1 if s is not that.
func unitCount(s, unit string) int {
	n, err := strconv.Atoi(strings.TrimSuffix(s, unit))
	if err != nil || !strings.HasSuffix(s, unit) {
		return -1
	}
	return n
}
