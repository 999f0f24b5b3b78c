package pod

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// changeBase is the manifest the TestDiffCompare cases edit.
const changeBase = `apiVersion: v1
kind: Pod
metadata:
  name: shop
  labels:
    role: front
spec:
  initContainers:
  - name: setup
    image: busybox:1.36
    command: ["true"]
  containers:
  - name: app
    image: busybox:1.36
    args: ["sleep", "1000"]
    ports:
    - containerPort: 80
  - name: side
    image: busybox:1.36
    args: ["sleep", "2000"]
  volumes:
  - name: data
    emptyDir: {}
`

// edit returns changeBase with old replaced by new, failing when old is
// not there.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(changeBase, old) {
		t.Fatalf("%q is not in the base manifest", old)
	}
	return strings.Replace(changeBase, old, new, 1)
}

func TestDiffCompare(t *testing.T) {
	later := testOpts
	later.Seen = testOpts.Seen.Add(time.Hour)
	base := decodeOne(t, changeBase, testOpts)
	tests := []struct {
		name       string
		manifest   string
		want       Action
		fields     []string          // ActionReplace
		containers []ContainerChange // ActionRestart
		notes      int
	}{
		{name: "re-read unchanged", manifest: changeBase, want: ActionNone},
		{name: "args", manifest: edit(t, `["sleep", "1000"]`, `["sleep", "1001"]`), want: ActionRestart,
			containers: []ContainerChange{{Name: "app", Action: ContainerRestart, Fields: []string{"args"}}}},
		{name: "image", manifest: edit(t, "image: busybox:1.36\n    args: [\"sleep\", \"2000\"]", "image: busybox:1.37\n    args: [\"sleep\", \"2000\"]"), want: ActionRestart,
			containers: []ContainerChange{{Name: "side", Action: ContainerRestart, Fields: []string{"image"}}}},
		{name: "container port", manifest: edit(t, "containerPort: 80", "containerPort: 81"), want: ActionRestart,
			containers: []ContainerChange{{Name: "app", Action: ContainerRestart, Fields: []string{"ports"}}}},
		{name: "volume", manifest: edit(t, "emptyDir: {}", "emptyDir: {medium: Memory}"), want: ActionReplace,
			fields: []string{"spec.volumes"}},
		{name: "label", manifest: edit(t, "role: front", "role: back"), want: ActionReplace,
			fields: []string{"metadata.labels[role]"}},
		{name: "annotation", manifest: edit(t, "  labels:", "  annotations:\n    team: a\n  labels:"), want: ActionReplace,
			fields: []string{"metadata.annotations[team]"}},
		{name: "hostPort", manifest: edit(t, "containerPort: 80", "containerPort: 80\n      hostPort: 8080"), want: ActionReplace,
			fields: []string{"spec.containers[app].ports.hostPort"}},
		{name: "hostNetwork", manifest: edit(t, "  volumes:", "  hostNetwork: true\n  volumes:"), want: ActionReplace,
			fields: []string{"spec.hostNetwork", "spec.containers[app].ports.hostPort"}}, // hostNetwork defaults hostPort
		{name: "init container", manifest: edit(t, `command: ["true"]`, `command: ["false"]`), want: ActionReplace,
			fields: []string{"spec.initContainers[setup].command"}},
		{name: "init container added", manifest: edit(t, "  containers:", "  - name: more\n    image: busybox:1.36\n  containers:"), want: ActionReplace,
			fields: []string{"spec.initContainers[more]"}},
		{name: "app container added", manifest: edit(t, "  volumes:", "  - name: extra\n    image: busybox:1.36\n  volumes:"), want: ActionRestart,
			containers: []ContainerChange{{Name: "extra", Action: ContainerStart}}},
		{name: "app container removed", manifest: edit(t, "  - name: side\n    image: busybox:1.36\n    args: [\"sleep\", \"2000\"]\n", ""), want: ActionRestart,
			containers: []ContainerChange{{Name: "side", Action: ContainerStop}}},
		{name: "own annotation", manifest: edit(t, "  labels:", "  annotations:\n    staticlet.io/after: db\n  labels:"), want: ActionNone, notes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := decodeOne(t, tc.manifest, later)
			got := Compare(base, p)
			if got.Action != tc.want || !slices.Equal(got.Fields, tc.fields) || !slices.EqualFunc(got.Containers, tc.containers, func(a, b ContainerChange) bool {
				return a.Name == b.Name && a.Action == b.Action && slices.Equal(a.Fields, b.Fields)
			}) || len(got.Notes) != tc.notes {
				t.Errorf("Compare = %+v, want %s with fields %v, containers %+v, %d notes", got, tc.want, tc.fields, tc.containers, tc.notes)
			}
			// The decision is the hashes' own.
			if replace := base.SandboxHash != p.SandboxHash; replace != (got.Action == ActionReplace) {
				t.Errorf("Compare = %s while the sandbox hashes differ: %v", got.Action, replace)
			}
			t.Log(got.Reason())
		})
	}
	if got := Compare(nil, base); got.Action != ActionAdd {
		t.Errorf("Compare(nil, p) = %s, want %s", got.Action, ActionAdd)
	}
	if got := Compare(base, nil); got.Action != ActionRemove {
		t.Errorf("Compare(p, nil) = %s, want %s", got.Action, ActionRemove)
	}
}

// TestDiffReported checks that a pod that went through the status API's
// JSON keeps the daemon's hashes.
func TestDiffReported(t *testing.T) {
	p := decodeOne(t, changeBase, testOpts)
	data, err := json.Marshal(p.Pod)
	if err != nil {
		t.Fatal(err)
	}
	var back v1.Pod
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	back.Status.Phase = v1.PodRunning
	r := Reported(&back, p.Source)
	if r.SandboxHash != p.SandboxHash {
		t.Errorf("Reported SandboxHash = %s, want the daemon's %s", r.SandboxHash, p.SandboxHash)
	}
	if got := Compare(r, p); got.Action != ActionNone {
		t.Errorf("Compare(Reported(p), p) = %s, want %s", got.Reason(), ActionNone)
	}
}
