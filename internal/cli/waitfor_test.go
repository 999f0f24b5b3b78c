package cli

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitPod is a pod in phase with the given conditions ("Ready=True").
func waitPod(phase v1.PodPhase, conds ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node", Namespace: "default"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}},
		Status:     v1.PodStatus{Phase: phase},
	}
	for _, c := range conds {
		typ, st, _ := strings.Cut(c, "=")
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodConditionType(typ), Status: v1.ConditionStatus(st)})
	}
	return p
}

func TestWaitForParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string // what the parse holds; empty when wantErr
		wantErr string
	}{
		{in: "delete", want: "delete"},
		{in: "DELETE", want: "delete"},
		{in: "condition=Ready", want: "condition Ready=true"},
		{in: "condition=ready=false", want: "condition ready=false"},
		{in: "condition=PodReadyToStartContainers=True", want: "condition PodReadyToStartContainers=True"},
		{in: "jsonpath={.status.phase}=Running", want: "jsonpath {.status.phase} = Running"},
		{in: "jsonpath='{.status.phase}'=Running", wantErr: "want a path"}, // the shell removes those quotes
		{in: "jsonpath={.status.phase}='Running'", want: "jsonpath {.status.phase} = Running"},
		{in: "jsonpath=.status.phase=Running", want: "jsonpath .status.phase = Running"},
		{in: "jsonpath=status.phase=Running", want: "jsonpath status.phase = Running"},
		{in: "jsonpath={status.podIP}", want: "jsonpath {status.podIP} = (any)"},
		{in: `jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`, want: `jsonpath {.status.conditions[?(@.type=="Ready")].status} = True`},
		{in: "", wantErr: "--for is required"},
		{in: "ready", wantErr: `unrecognized condition: "ready"`},
		{in: "Condition=Ready", wantErr: "unrecognized condition"},
		{in: "condition=", wantErr: "condition name cannot be empty"},
		{in: "condition=Ready=", wantErr: "condition value cannot be empty"},
		{in: "jsonpath=", wantErr: "jsonpath expression cannot be empty"},
		{in: "jsonpath={}", wantErr: "jsonpath expression cannot be empty"},
		{in: "jsonpath={.status.phase}=", wantErr: "value cannot be empty"},
		{in: "jsonpath={.status.phase}=''", wantErr: "value cannot be empty"},
		{in: "jsonpath={.status.phase", wantErr: "unclosed {"},
		{in: "jsonpath={.status.phase}Running", wantErr: "want '{PATH}' or '{PATH}'=VALUE"},
		{in: "jsonpath=status.phase}", wantErr: "want a path"},
		{in: "jsonpath={.status[}", wantErr: "jsonpath"},
	}
	for _, tt := range tests {
		w, err := parseFor(tt.in)
		if got := describeFor(w); !errorAsWanted(err, tt.wantErr) || (err == nil && got != tt.want) {
			t.Errorf("parseFor(%q) = %s, %v; want %s", tt.in, got, err, wanted(tt.want, tt.wantErr))
		}
	}
}

// errorAsWanted tells whether err is as a table wants it: nil when want is
// empty, else an error that says want.
func errorAsWanted(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

// wanted says what a table wants, for a failure message.
func wanted(want, wantErr string) string {
	if wantErr != "" {
		return fmt.Sprintf("an error with %q", wantErr)
	}
	return want
}

// describeFor shows what a parsed --for holds, for the tests.
func describeFor(w waitCond) string {
	switch {
	case w.delete:
		return "delete"
	case w.path != nil:
		v := w.value
		if v == "" {
			v = "(any)"
		}
		return fmt.Sprintf("jsonpath %s = %s", w.expr, v)
	case w.condition != "":
		return fmt.Sprintf("condition %s=%s", w.condition, w.status)
	}
	return "(none)"
}

func TestWaitForMet(t *testing.T) {
	running := waitPod(v1.PodRunning, "PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True")
	pending := waitPod(v1.PodPending, "PodScheduled=True", "Initialized=False", "Ready=False")
	running.Status.PodIP = "10.88.0.2"
	running.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "a", RestartCount: 3}, {Name: "b"}}

	tests := []struct {
		name    string
		for_    string
		pod     *v1.Pod
		want    bool
		wantErr string
	}{
		{"delete: gone", "delete", nil, true, ""},
		{"delete: still there", "delete", running, false, ""},
		{"ready", "condition=Ready", running, true, ""},
		{"ready in lower case", "condition=ready", running, true, ""},
		{"ready=TRUE", "condition=Ready=TRUE", running, true, ""},
		{"not ready yet", "condition=Ready", pending, false, ""},
		{"ready=false", "condition=Ready=false", pending, true, ""},
		{"ready=false on a ready pod", "condition=Ready=false", running, false, ""},
		{"containers ready", "condition=ContainersReady", running, true, ""},
		{"initialized", "condition=initialized", running, true, ""},
		{"scheduled while pending", "condition=PodScheduled", pending, true, ""},
		{"sandbox ready", "condition=PodReadyToStartContainers", running, true, ""},
		{"condition the pod lacks", "condition=PodReadyToStartContainers", pending, false, ""},
		{"condition of no pod", "condition=Ready", nil, false, ""},
		{"condition=Ready=false of no pod", "condition=Ready=false", nil, false, ""},
		{"phase", "jsonpath={.status.phase}=Running", running, true, ""},
		{"phase not yet", "jsonpath={.status.phase}=Running", pending, false, ""},
		{"phase of no pod", "jsonpath={.status.phase}=Running", nil, false, ""},
		{"phase is case-sensitive", "jsonpath={.status.phase}=running", running, false, ""},
		{"any podIP", "jsonpath={.status.podIP}", running, true, ""},
		{"no podIP yet", "jsonpath={.status.podIP}", pending, false, ""},
		{"a number", "jsonpath={.status.containerStatuses[0].restartCount}=3", running, true, ""},
		{"a filter", `jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`, running, true, ""},
		{"several values", "jsonpath={.spec.containers[*].name}=a", running, false, "more than one value"},
		{"an object", "jsonpath={.status}=x", running, false, "nested object"},
		{"an object, any value", "jsonpath={.status}", running, true, ""},
	}
	for _, tt := range tests {
		w, err := parseFor(tt.for_)
		if err != nil {
			t.Fatalf("%s: parseFor(%q) = %v", tt.name, tt.for_, err)
		}
		got, err := w.met(tt.pod)
		if !errorAsWanted(err, tt.wantErr) || got != tt.want {
			t.Errorf("%s: --for=%s met = %v, %v; want %v, %s", tt.name, tt.for_, got, err, tt.want, wanted("no error", tt.wantErr))
		}
	}
}

func TestWaitPodArgs(t *testing.T) {
	tests := []struct {
		args    string
		all     bool
		want    string
		wantErr string
	}{
		{args: "pod/web", want: "[web]"},
		{args: "pods/web-node po/etcd Pod/db", want: "[web-node etcd db]"},
		{args: "web", want: "[web]"},
		{args: "pod web etcd", want: "[web etcd]"},
		{args: "pods", all: true, want: "[]"},
		{args: "", all: true, want: "[]"},
		{args: "", wantErr: "name at least one pod"},
		{args: "pod", wantErr: `"pod" names no pod`},
		{args: "pod/web", all: true, wantErr: "--all takes no pod names"},
		{args: "deployment/web", wantErr: "waits for pods only"},
		{args: "kube-system/etcd", wantErr: "-n for a namespace"},
		{args: "pod/", wantErr: "not a pod name"},
		{args: "pod/kube-system/etcd", wantErr: "not a pod name"},
	}
	for _, tt := range tests {
		got, err := parsePodArgs(strings.Fields(tt.args), tt.all)
		if !errorAsWanted(err, tt.wantErr) || (err == nil && fmt.Sprint(got) != tt.want) {
			t.Errorf("parsePodArgs(%q, all=%v) = %q, %v; want %s", tt.args, tt.all, got, err, wanted(tt.want, tt.wantErr))
		}
	}
}
