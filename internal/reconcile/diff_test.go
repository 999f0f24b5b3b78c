package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// diffBase is the manifest TestDiffAgreesWithReconciler edits.
const diffBase = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
  labels:
    app: web
spec:
  terminationGracePeriodSeconds: 3
  initContainers:
  - name: setup
    image: busybox:1.36
    command: ["true"]
  containers:
  - name: a
    image: busybox:1.36
    args: ["sleep", "1000"]
  - name: b
    image: busybox:1.36
    args: ["sleep", "2000"]
  volumes:
  - name: data
    emptyDir: {}
`

// TestDiffAgreesWithReconciler checks that what pod.Compare says of an
// edit (the decision `staticlet diff` prints) is what the reconciler does
// when the edited pod becomes the desired one: the pod is made again
// exactly when Compare says replace, and otherwise exactly the containers
// it names are stopped and started.
func TestDiffAgreesWithReconciler(t *testing.T) {
	tests := []struct{ name, old, new string }{
		{"unchanged", "", ""},
		{"args", `["sleep", "1000"]`, `["sleep", "1001"]`},
		{"image", "image: busybox:1.36\n    args: [\"sleep\", \"2000\"]", "image: busybox:1.37\n    args: [\"sleep\", \"2000\"]"},
		{"volume", "emptyDir: {}", "emptyDir: {medium: Memory}"},
		{"label", "app: web", "app: web2"},
		{"hostPort", "args: [\"sleep\", \"1000\"]", "args: [\"sleep\", \"1000\"]\n    ports:\n    - containerPort: 80\n      hostPort: 8080"},
		{"init container", `command: ["true"]`, `command: ["false"]`},
		{"container added", "  volumes:", "  - name: c\n    image: busybox:1.36\n  volumes:"},
		{"container removed", "  - name: b\n    image: busybox:1.36\n    args: [\"sleep\", \"2000\"]\n", ""},
		{"own annotation", "  labels:", "  annotations:\n    staticlet.io/restart-on-change: \"true\"\n  labels:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(diffBase, tc.old) {
				t.Fatalf("%q is not in the base manifest", tc.old)
			}
			p1 := decodePod(t, diffBase)
			p2 := decodePod(t, strings.Replace(diffBase, tc.old, tc.new, 1))
			ch := pod.Compare(p1, p2)
			bubble(t, func(t *testing.T) {
				h := newHarness(t, Config{})
				h.set(p1)
				h.exit(h.rt.newest(t, p1.Key(), "setup").ID, 0)
				before := map[string]string{}
				for _, r := range h.rt.records(p1.Key()) {
					if r.Kind == pod.KindApp {
						before[r.ID] = r.Name
					}
				}
				m := h.mark()
				h.set(p2)
				h.sleep(time.Minute)
				calls := h.since(m)
				replaced := slices.ContainsFunc(calls, func(c call) bool { return c.op == "create" })
				if replaced != (ch.Action == pod.ActionReplace) {
					t.Fatalf("Compare says %q; the reconciler made a new sandbox: %v\n%v", ch.Reason(), replaced, calls)
				}
				if replaced {
					return
				}
				var stopped, started, wantStopped, wantStarted []string
				for _, c := range calls {
					switch {
					case c.op == "stop" && before[c.id] != "":
						stopped = append(stopped, before[c.id])
					case c.op == "start" && c.kind == pod.KindApp:
						started = append(started, c.name)
					}
				}
				for _, c := range ch.Containers {
					if c.Action != pod.ContainerStart {
						wantStopped = append(wantStopped, c.Name)
					}
					if c.Action != pod.ContainerStop {
						wantStarted = append(wantStarted, c.Name)
					}
				}
				slices.Sort(stopped)
				slices.Sort(started)
				slices.Sort(wantStopped)
				slices.Sort(wantStarted)
				if !slices.Equal(stopped, wantStopped) || !slices.Equal(started, wantStarted) {
					t.Errorf("Compare says %q (stop %v, start %v); the reconciler stopped %v and started %v", ch.Reason(), wantStopped, wantStarted, stopped, started)
				}
			})
		})
	}
}
