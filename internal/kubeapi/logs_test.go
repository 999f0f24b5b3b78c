package kubeapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/status"
)

// logCall is one call of a fake LogOpener.
type logCall struct {
	pod, container string
	opts           status.LogOptions
}

// fakeLogs is a LogOpener that records its calls and answers with the
// text of its pod and container, or with err for container "broken".
type fakeLogs struct {
	calls chan logCall
}

func (f *fakeLogs) open(_ context.Context, pod, container string, opts status.LogOptions) (io.ReadCloser, error) {
	f.calls <- logCall{pod, container, opts}
	if container == "broken" {
		return nil, errors.New("failed to open log file of container broken")
	}
	return io.NopCloser(strings.NewReader("log of " + pod + " " + container + "\n")), nil
}

// logPods are pods in the states the kubelet answers logs for.
func logPods() []*v1.Pod {
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	restarted := func(name string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: running, RestartCount: 1, ContainerID: "containerd://2",
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://1"}}}
	}
	web := testPod("ns", "web", "Running")
	web.Spec.Containers = append(web.Spec.Containers, v1.Container{Name: "broken"})
	web.Status.ContainerStatuses = []v1.ContainerStatus{restarted("c"), restarted("broken")}
	two := testPod("ns", "two", "Running")
	two.Spec.InitContainers = []v1.Container{{Name: "init"}}
	two.Spec.Containers = []v1.Container{{Name: "a"}, {Name: "b"}}
	fresh := testPod("ns", "fresh", "Running")
	fresh.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: running, ContainerID: "containerd://1"}}
	pulling := testPod("ns", "pulling", "Pending")
	pulling.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c",
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	creating := testPod("ns", "creating", "Pending")
	creating.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c",
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	return []*v1.Pod{web, two, fresh, pulling, creating, testPod("ns", "nostatus", "Pending")}
}

func newLogAPI(t *testing.T) (*testAPI, *fakeLogs) {
	t.Helper()
	f := &fakeLogs{calls: make(chan logCall, 10)}
	api := newTestAPI(t, Config{Logs: f.open})
	for _, p := range logPods() {
		api.store.SetPod(p)
	}
	return api, f
}

// TestPodLogOptions: every option kubectl sends reaches the LogOpener as
// the kubelet would take it, through client-go's GetLogs.
func TestPodLogOptions(t *testing.T) {
	api, f := newLogAPI(t)
	cs := api.clientset(t)
	since := metav1.NewTime(time.Date(2026, 11, 21, 3, 15, 0, 0, time.UTC))
	tests := []struct {
		name string
		pod  string
		opts v1.PodLogOptions
		want logCall
	}{
		{"defaults", "web", v1.PodLogOptions{Container: "c"}, logCall{"ns/web", "c", status.LogOptions{TailLines: -1}}},
		{"the only container", "fresh", v1.PodLogOptions{}, logCall{"ns/fresh", "c", status.LogOptions{TailLines: -1}}},
		{"all of kubectl's", "web", v1.PodLogOptions{Container: "c", Follow: true, Previous: true, Timestamps: true,
			TailLines: int64p(5), SinceSeconds: int64p(60), LimitBytes: int64p(100), InsecureSkipTLSVerifyBackend: true},
			logCall{"ns/web", "c", status.LogOptions{Follow: true, Previous: true, Timestamps: true, TailLines: 5, SinceSeconds: 60, LimitBytes: 100}}},
		{"since a time", "web", v1.PodLogOptions{Container: "c", SinceTime: &since},
			logCall{"ns/web", "c", status.LogOptions{TailLines: -1, SinceTime: since.Time}}},
		{"an init container", "two", v1.PodLogOptions{Container: "init"}, logCall{"ns/two", "init", status.LogOptions{TailLines: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.pod == "two" {
				// An init container that ran: give it a status.
				p := logPods()[1]
				p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", ContainerID: "containerd://i",
					State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://i"}}}}
				api.store.SetPod(p)
			}
			b, err := cs.CoreV1().Pods("ns").GetLogs(tt.pod, &tt.opts).DoRaw(t.Context())
			if err != nil {
				t.Fatalf("GetLogs(%s, %+v): %v", tt.pod, tt.opts, err)
			}
			if want := "log of " + tt.want.pod + " " + tt.want.container + "\n"; string(b) != want {
				t.Errorf("GetLogs read %q, want %q", b, want)
			}
			got := <-f.calls
			if !got.opts.SinceTime.Equal(tt.want.opts.SinceTime) {
				t.Errorf("LogOpener sinceTime = %v, want %v", got.opts.SinceTime, tt.want.opts.SinceTime)
			}
			got.opts.SinceTime, tt.want.opts.SinceTime = time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("LogOpener called with %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestPodLogErrors: the apiserver's and the kubelet's answers, with their
// codes and messages, for what has no log to read.
func TestPodLogErrors(t *testing.T) {
	api, _ := newLogAPI(t)
	cs := api.clientset(t)
	tests := []struct {
		pod     string
		opts    v1.PodLogOptions
		code    int32
		message string
	}{
		{"nope", v1.PodLogOptions{}, http.StatusNotFound, `pods "nope" not found`},
		{"two", v1.PodLogOptions{}, http.StatusBadRequest, "a container name must be specified for pod two, choose one of: [init a b]"},
		{"web", v1.PodLogOptions{Container: "x"}, http.StatusBadRequest, "container x is not valid for pod web"},
		{"fresh", v1.PodLogOptions{Previous: true}, http.StatusBadRequest, `previous terminated container "c" in pod "fresh" not found`},
		{"two", v1.PodLogOptions{Container: "a"}, http.StatusBadRequest, `container "a" in pod "two" is not available`},
		{"pulling", v1.PodLogOptions{}, http.StatusBadRequest, `container "c" in pod "pulling" is waiting to start: trying and failing to pull image`},
		{"creating", v1.PodLogOptions{}, http.StatusBadRequest, `container "c" in pod "creating" is waiting to start: ContainerCreating`},
		{"web", v1.PodLogOptions{Container: "broken"}, http.StatusBadRequest, "failed to open log file of container broken"},
		{"fresh", v1.PodLogOptions{TailLines: int64p(-1)}, http.StatusUnprocessableEntity,
			`PodLogOptions "fresh" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`},
		{"fresh", v1.PodLogOptions{LimitBytes: int64p(0)}, http.StatusUnprocessableEntity,
			`PodLogOptions "fresh" is invalid: limitBytes: Invalid value: 0: must be greater than 0`},
		{"fresh", v1.PodLogOptions{SinceSeconds: int64p(5), SinceTime: &metav1.Time{Time: time.Now()}}, http.StatusUnprocessableEntity,
			"at most one of `sinceTime` or `sinceSeconds` may be specified"},
	}
	for _, tt := range tests {
		// Stream, as kubectl logs reads (DoRaw does not decode a Status).
		rc, err := cs.CoreV1().Pods("ns").GetLogs(tt.pod, &tt.opts).Stream(t.Context())
		if err == nil {
			rc.Close()
		}
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Code != tt.code || !strings.Contains(st.Status().Message, tt.message) {
			t.Errorf("GetLogs(%s, %+v) = %v, want %d %q", tt.pod, tt.opts, err, tt.code, tt.message)
		}
	}
	// A malformed option is a 400, as the apiserver's decoding answers.
	err := cs.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").Name("fresh").SubResource("log").
		Param("tailLines", "ten").Do(t.Context()).Error()
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `parsing "ten"`) {
		t.Errorf("GetLogs(tailLines=ten) = %v, want 400 naming the value", err)
	}
}

// TestPodLogFollow: a followed log comes line by line, as it is written,
// and pods/log is in discovery.
func TestPodLogFollow(t *testing.T) {
	pr, pw := io.Pipe()
	api := newTestAPI(t, Config{Logs: func(ctx context.Context, _, _ string, opts status.LogOptions) (io.ReadCloser, error) {
		if !opts.Follow {
			return nil, errors.New("not following")
		}
		return pr, nil
	}})
	// Before the server stops: the real opener ends with the request.
	t.Cleanup(func() { pw.Close() })
	api.store.SetPod(logPods()[2])
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rc, err := cs.CoreV1().Pods("ns").GetLogs("fresh", &v1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	lines := bufio.NewReader(rc)
	for i := range 3 {
		want := fmt.Sprintf("line %d\n", i)
		if _, err := io.WriteString(pw, want); err != nil {
			t.Fatal(err)
		}
		if got, err := lines.ReadString('\n'); got != want {
			t.Fatalf("followed %q, %v; want %q", got, err, want)
		}
	}
	pw.Close()
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Errorf("after the log ended: %q, %v; want EOF", rest, err)
	}

	res, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool {
		return r.Name == "pods/log" && slices.Equal(r.Verbs, []string{"get"})
	}) {
		t.Errorf("discovery of v1 lacks pods/log with verb get: %+v", res.APIResources)
	}
}

func int64p(v int64) *int64 { return &v }
