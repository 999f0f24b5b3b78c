package reconcile

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// decodePod decodes one manifest the way the sources do, so that tests get
// defaulted pods with real hashes.
func decodePod(t *testing.T, manifest string) *pod.Pod {
	t.Helper()
	pods, err := pod.Decode("/etc/staticlet/pods/test.yaml", []byte(manifest), pod.Options{NodeName: "n"})
	if err != nil {
		t.Fatalf("decoding test manifest: %v\n%s", err, manifest)
	}
	if len(pods) != 1 {
		t.Fatalf("decoding test manifest: got %d pods, want 1", len(pods))
	}
	return pods[0]
}

// podSpec describes a test pod briefly.
type podSpec struct {
	name     string
	policy   v1.RestartPolicy  // default Always
	grace    int               // terminationGracePeriodSeconds; 0 leaves the default
	inits    []string          // init container names
	apps     []string          // app container names; default "app"
	image    string            // image of every container; default busybox:1.36
	imageOf  map[string]string // images of single containers, by name
	label    string            // a value for label "v", to change the sandbox hash
	hostNet  bool
	sharePID bool
	sidecars map[string]bool // init containers that restart Always
	resource string          // a resources: block for every container, indented for it
}

// mkPod builds a test pod from s through pod.Decode.
func mkPod(t *testing.T, s podSpec) *pod.Pod {
	t.Helper()
	if s.name == "" {
		s.name = "web"
	}
	if s.policy == "" {
		s.policy = v1.RestartPolicyAlways
	}
	if s.apps == nil {
		s.apps = []string{"app"}
	}
	if s.image == "" {
		s.image = "busybox:1.36"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: kube-system\n", s.name)
	if s.label != "" {
		fmt.Fprintf(&b, "  labels:\n    v: %q\n", s.label)
	}
	fmt.Fprintf(&b, "spec:\n  restartPolicy: %s\n", s.policy)
	if s.grace != 0 {
		fmt.Fprintf(&b, "  terminationGracePeriodSeconds: %d\n", s.grace)
	}
	if s.hostNet {
		b.WriteString("  hostNetwork: true\n")
	}
	if s.sharePID {
		b.WriteString("  shareProcessNamespace: true\n")
	}
	list := func(field string, names []string) {
		if len(names) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s:\n", field)
		for _, n := range names {
			image := s.image
			if im, ok := s.imageOf[n]; ok {
				image = im
			}
			fmt.Fprintf(&b, "  - name: %s\n    image: %s\n", n, image)
			if s.sidecars[n] {
				b.WriteString("    restartPolicy: Always\n")
			}
			if s.resource != "" {
				b.WriteString(s.resource)
			}
		}
	}
	list("initContainers", s.inits)
	list("containers", s.apps)
	return decodePod(t, b.String())
}

// recs is a fluent builder of the records a buildPod test starts from.
type recs struct {
	p   *pod.Pod
	sb  pod.Record
	out []pod.Record
}

func newRecs(p *pod.Pod, sandboxState pod.TaskState) *recs {
	sb := pod.Record{ID: "sb1", Pod: p.Key(), Kind: pod.KindSandbox, Hash: p.SandboxHash, State: sandboxState, CreatedAt: t0, StartedAt: t0}
	return &recs{p: p, sb: sb, out: []pod.Record{sb}}
}

func (r *recs) container(name string) *v1.Container {
	for i := range r.p.Spec.InitContainers {
		if r.p.Spec.InitContainers[i].Name == name {
			return &r.p.Spec.InitContainers[i]
		}
	}
	for i := range r.p.Spec.Containers {
		if r.p.Spec.Containers[i].Name == name {
			return &r.p.Spec.Containers[i]
		}
	}
	panic("no container " + name)
}

// run adds a running record of name.
func (r *recs) run(name string, attempt int) *recs {
	rec := running(r.container(name), fmt.Sprintf("%s-%d", name, attempt), attempt)
	rec.SandboxID = r.sb.ID
	rec.StartedAt = t0.Add(time.Duration(attempt) * time.Minute)
	r.out = append(r.out, rec)
	return r
}

// exit adds an exited record of name.
func (r *recs) exit(name string, attempt int, code int32) *recs {
	start := time.Duration(attempt) * time.Minute
	rec := exited(r.container(name), fmt.Sprintf("%s-%d", name, attempt), attempt, code, start, start+30*time.Second)
	rec.SandboxID = r.sb.ID
	for _, c := range r.p.Spec.InitContainers {
		if c.Name == name {
			rec.Kind = pod.KindInit
		}
	}
	r.out = append(r.out, rec)
	return r
}

func (r *recs) input(waiting map[string]waitingState) statusInput {
	return statusInput{pod: r.p, view: newView(r.out), sandbox: r.sb, waiting: waiting, hostIPs: []string{"10.0.0.5"}, now: t0.Add(time.Hour)}
}

func TestBuildPod(t *testing.T) {
	always := mkPod(t, podSpec{})
	two := mkPod(t, podSpec{apps: []string{"a", "b"}})
	onFailure := mkPod(t, podSpec{policy: v1.RestartPolicyOnFailure})
	never := mkPod(t, podSpec{policy: v1.RestartPolicyNever})
	neverTwo := mkPod(t, podSpec{policy: v1.RestartPolicyNever, apps: []string{"a", "b"}})
	withInit := mkPod(t, podSpec{inits: []string{"init"}})
	neverInit := mkPod(t, podSpec{policy: v1.RestartPolicyNever, inits: []string{"init"}})
	crash := map[string]waitingState{"app": {reason: "CrashLoopBackOff", message: "back-off 2s restarting failed container=app"}}

	type cstate struct {
		state        string // running, waiting:<reason>, terminated:<code>
		last         string // "" or terminated:<code>
		restartCount int32
		ready        bool
	}
	tests := []struct {
		name      string
		in        statusInput
		phase     v1.PodPhase
		conds     string // ReadyToStartContainers,Initialized,Ready,ContainersReady,PodScheduled as T/F
		readyWhy  string // reason of the Ready condition
		inits     []cstate
		apps      []cstate
		noStarted bool // no startTime
	}{
		{
			name:      "no sandbox yet",
			in:        statusInput{pod: always, view: newView(nil), hostIPs: []string{"10.0.0.5"}, now: t0},
			phase:     v1.PodPending,
			conds:     "FTFFT",
			readyWhy:  "ContainersNotReady",
			apps:      []cstate{{state: "waiting:ContainerCreating"}},
			noStarted: true,
		},
		{
			name:     "sandbox, container not started",
			in:       newRecs(always, pod.TaskRunning).input(nil),
			phase:    v1.PodPending,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "waiting:ContainerCreating"}},
		},
		{
			name:     "start failed with a reason",
			in:       newRecs(always, pod.TaskRunning).input(map[string]waitingState{"app": {reason: "ErrImageNeverPull", message: "not present"}}),
			phase:    v1.PodPending,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "waiting:ErrImageNeverPull"}},
		},
		{
			name:  "running",
			in:    newRecs(always, pod.TaskRunning).run("app", 0).input(nil),
			phase: v1.PodRunning,
			conds: "TTTTT",
			apps:  []cstate{{state: "running", ready: true}},
		},
		{
			name:  "running after restarts keeps lastState",
			in:    newRecs(always, pod.TaskRunning).exit("app", 2, 1).run("app", 3).input(nil),
			phase: v1.PodRunning,
			conds: "TTTTT",
			apps:  []cstate{{state: "running", last: "terminated:1", restartCount: 3, ready: true}},
		},
		{
			name:     "one of two running is Pending",
			in:       newRecs(two, pod.TaskRunning).run("a", 0).input(nil),
			phase:    v1.PodPending,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "running", ready: true}, {state: "waiting:ContainerCreating"}},
		},
		{
			name:     "crash loop back-off",
			in:       newRecs(always, pod.TaskRunning).exit("app", 1, 2).exit("app", 2, 1).input(crash),
			phase:    v1.PodRunning,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "waiting:CrashLoopBackOff", last: "terminated:1", restartCount: 2}},
		},
		{
			name:     "Always exited, restart not yet decided",
			in:       newRecs(always, pod.TaskRunning).exit("app", 0, 0).input(nil),
			phase:    v1.PodRunning,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "terminated:0"}},
		},
		{
			name:     "OnFailure exit 0 succeeded",
			in:       newRecs(onFailure, pod.TaskExited).exit("app", 0, 0).input(nil),
			phase:    v1.PodSucceeded,
			conds:    "FTFFT",
			readyWhy: "PodCompleted",
			apps:     []cstate{{state: "terminated:0"}},
		},
		{
			name:     "OnFailure exit 0 ignores a stale back-off",
			in:       newRecs(onFailure, pod.TaskExited).exit("app", 1, 0).input(crash),
			phase:    v1.PodSucceeded,
			conds:    "FTFFT",
			readyWhy: "PodCompleted",
			apps:     []cstate{{state: "terminated:0", restartCount: 1}},
		},
		{
			name:     "OnFailure exit 1 keeps running",
			in:       newRecs(onFailure, pod.TaskRunning).exit("app", 0, 1).input(nil),
			phase:    v1.PodRunning,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "terminated:1"}},
		},
		{
			name:     "Never exit 0 succeeded",
			in:       newRecs(never, pod.TaskExited).exit("app", 0, 0).input(nil),
			phase:    v1.PodSucceeded,
			conds:    "FTFFT",
			readyWhy: "PodCompleted",
			apps:     []cstate{{state: "terminated:0"}},
		},
		{
			name:     "Never exit 1 failed",
			in:       newRecs(never, pod.TaskExited).exit("app", 0, 1).input(nil),
			phase:    v1.PodFailed,
			conds:    "FTFFT",
			readyWhy: "PodCompleted",
			apps:     []cstate{{state: "terminated:1"}},
		},
		{
			name:     "Never one failed one running",
			in:       newRecs(neverTwo, pod.TaskRunning).exit("a", 0, 1).run("b", 0).input(nil),
			phase:    v1.PodRunning,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			apps:     []cstate{{state: "terminated:1"}, {state: "running", ready: true}},
		},
		{
			name:     "Never one failed one succeeded",
			in:       newRecs(neverTwo, pod.TaskExited).exit("a", 0, 1).exit("b", 0, 0).input(nil),
			phase:    v1.PodFailed,
			conds:    "FTFFT",
			readyWhy: "PodCompleted",
			apps:     []cstate{{state: "terminated:1"}, {state: "terminated:0"}},
		},
		{
			name:     "init running",
			in:       newRecs(withInit, pod.TaskRunning).run("init", 0).input(nil),
			phase:    v1.PodPending,
			conds:    "TFFFT",
			readyWhy: "ContainersNotReady",
			inits:    []cstate{{state: "running", ready: true}},
			apps:     []cstate{{state: "waiting:ContainerCreating"}},
		},
		{
			name:     "init done, app not started",
			in:       newRecs(withInit, pod.TaskRunning).exit("init", 0, 0).input(nil),
			phase:    v1.PodPending,
			conds:    "TTFFT",
			readyWhy: "ContainersNotReady",
			inits:    []cstate{{state: "terminated:0"}},
			apps:     []cstate{{state: "waiting:ContainerCreating"}},
		},
		{
			name:  "init done, app running",
			in:    newRecs(withInit, pod.TaskRunning).exit("init", 0, 0).run("app", 0).input(nil),
			phase: v1.PodRunning,
			conds: "TTTTT",
			inits: []cstate{{state: "terminated:0"}},
			apps:  []cstate{{state: "running", ready: true}},
		},
		{
			name:  "init records gone, app running",
			in:    newRecs(withInit, pod.TaskRunning).run("app", 0).input(nil),
			phase: v1.PodRunning,
			conds: "TTTTT",
			inits: []cstate{{state: "terminated:0"}}, // it completed: the app runs
			apps:  []cstate{{state: "running", ready: true}},
		},
		{
			name:     "init failed under Always waits to restart",
			in:       newRecs(withInit, pod.TaskRunning).exit("init", 1, 1).input(map[string]waitingState{"init": {reason: "CrashLoopBackOff"}}),
			phase:    v1.PodPending,
			conds:    "TFFFT",
			readyWhy: "ContainersNotReady",
			inits:    []cstate{{state: "waiting:CrashLoopBackOff", last: "terminated:1", restartCount: 1}},
			apps:     []cstate{{state: "waiting:ContainerCreating"}},
		},
		{
			name:     "init failed under Never",
			in:       newRecs(neverInit, pod.TaskRunning).exit("init", 0, 1).input(nil),
			phase:    v1.PodFailed,
			conds:    "TFFFT",
			readyWhy: "PodCompleted",
			inits:    []cstate{{state: "terminated:1"}},
			apps:     []cstate{{state: "waiting:ContainerCreating"}},
		},
		{
			name:     "sandbox dead",
			in:       newRecs(always, pod.TaskExited).run("app", 0).input(nil),
			phase:    v1.PodRunning,
			conds:    "FTTTT",
			readyWhy: "",
			apps:     []cstate{{state: "running", ready: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildPod(tt.in)
			st := got.Status
			if st.Phase != tt.phase {
				t.Errorf("buildPod(%s).Status.Phase = %s, want %s", tt.name, st.Phase, tt.phase)
			}
			wantTypes := []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled}
			var conds strings.Builder
			for i, c := range st.Conditions {
				if i < len(wantTypes) && c.Type != wantTypes[i] {
					t.Errorf("buildPod(%s) condition %d is %s, want %s", tt.name, i, c.Type, wantTypes[i])
				}
				conds.WriteString(string(c.Status)[:1])
				if !c.LastTransitionTime.Time.Equal(tt.in.now) {
					t.Errorf("buildPod(%s) condition %s at %v, want %v", tt.name, c.Type, c.LastTransitionTime, tt.in.now)
				}
			}
			if conds.String() != tt.conds {
				t.Errorf("buildPod(%s) conditions = %s, want %s (%+v)", tt.name, conds.String(), tt.conds, st.Conditions)
			}
			if len(st.Conditions) > 2 && st.Conditions[2].Reason != tt.readyWhy {
				t.Errorf("buildPod(%s) Ready reason = %q, want %q", tt.name, st.Conditions[2].Reason, tt.readyWhy)
			}
			if len(st.Conditions) > 1 && st.Conditions[1].Status == v1.ConditionFalse && st.Conditions[1].Reason != "ContainersNotInitialized" {
				t.Errorf("buildPod(%s) Initialized reason = %q, want ContainersNotInitialized", tt.name, st.Conditions[1].Reason)
			}
			if (st.StartTime == nil) != tt.noStarted {
				t.Errorf("buildPod(%s).Status.StartTime = %v, want set: %v", tt.name, st.StartTime, !tt.noStarted)
			}
			if st.HostIP != "10.0.0.5" || st.PodIP != "" {
				t.Errorf("buildPod(%s) hostIP, podIP = %q, %q, want 10.0.0.5 and none", tt.name, st.HostIP, st.PodIP)
			}
			check := func(kind string, got []v1.ContainerStatus, want []cstate) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("buildPod(%s) has %d %s statuses, want %d", tt.name, len(got), kind, len(want))
				}
				for i, cs := range got {
					g := cstate{state: stateString(cs.State), last: stateString(cs.LastTerminationState), restartCount: cs.RestartCount, ready: cs.Ready}
					if g.last == "none" {
						g.last = ""
					}
					if g != want[i] {
						t.Errorf("buildPod(%s) %s status %s = %+v, want %+v", tt.name, kind, cs.Name, g, want[i])
					}
					if cs.State.Running != nil && (cs.Started == nil || !*cs.Started) {
						t.Errorf("buildPod(%s) %s status %s: running but started = %v", tt.name, kind, cs.Name, cs.Started)
					}
					if cs.State.Running == nil && cs.Started != nil && *cs.Started {
						t.Errorf("buildPod(%s) %s status %s: not running but started", tt.name, kind, cs.Name)
					}
				}
			}
			check("init", st.InitContainerStatuses, tt.inits)
			check("app", st.ContainerStatuses, tt.apps)
			if got.Spec.Containers[0].Name != tt.in.pod.Spec.Containers[0].Name || got == tt.in.pod.Pod {
				t.Errorf("buildPod(%s) did not return a copy of the desired pod", tt.name)
			}
			if tt.in.pod.Status.Phase != "" {
				t.Errorf("buildPod(%s) changed the desired pod's status", tt.name)
			}
		})
	}
}

func stateString(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting:" + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated:%d", s.Terminated.ExitCode)
	}
	return "none"
}

func TestBuildPodDetails(t *testing.T) {
	p := mkPod(t, podSpec{})
	r := newRecs(p, pod.TaskRunning).exit("app", 4, 2).run("app", 5)
	r.out[1].ImageID = "sha256:old"
	r.out[2].ImageID = "sha256:abc"
	got := buildPod(r.input(nil)).Status
	cs := got.ContainerStatuses[0]
	if cs.ContainerID != "containerd://app-5" || cs.ImageID != "sha256:abc" || cs.Image != "busybox:1.36" {
		t.Errorf("container status ids = %q, %q, %q, want containerd://app-5, sha256:abc, busybox:1.36", cs.ContainerID, cs.ImageID, cs.Image)
	}
	if !cs.State.Running.StartedAt.Time.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("running since %v, want %v", cs.State.Running.StartedAt, t0.Add(5*time.Minute))
	}
	last := cs.LastTerminationState.Terminated
	if last.Reason != "Error" || last.ContainerID != "containerd://app-4" ||
		!last.StartedAt.Time.Equal(t0.Add(4*time.Minute)) || !last.FinishedAt.Time.Equal(t0.Add(4*time.Minute+30*time.Second)) {
		t.Errorf("lastState = %+v, want Error of app-4 from 4m to 4m30s", last)
	}
	if got.StartTime == nil || !got.StartTime.Time.Equal(t0) {
		t.Errorf("startTime = %v, want the sandbox's creation %v", got.StartTime, t0)
	}
	if got.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass = %s, want BestEffort", got.QOSClass)
	}
	if len(got.HostIPs) != 1 || got.HostIPs[0].IP != "10.0.0.5" || len(got.PodIPs) != 0 {
		t.Errorf("hostIPs, podIPs = %v, %v, want [10.0.0.5], []", got.HostIPs, got.PodIPs)
	}

	done := buildPod(newRecs(p, pod.TaskRunning).exit("app", 0, 0).input(nil)).Status.ContainerStatuses[0].State.Terminated
	if done.Reason != "Completed" {
		t.Errorf("reason of exit 0 = %q, want Completed", done.Reason)
	}

	// A crash-looping container shows the exit that put it there as lastState.
	crash := buildPod(newRecs(p, pod.TaskRunning).exit("app", 0, 1).exit("app", 1, 3).
		input(map[string]waitingState{"app": {reason: "CrashLoopBackOff", message: "back-off 1s"}})).Status.ContainerStatuses[0]
	if crash.State.Waiting.Message != "back-off 1s" || crash.LastTerminationState.Terminated.ExitCode != 3 || crash.RestartCount != 1 {
		t.Errorf("crash-looping status = %+v, want waiting back-off 1s, lastState exit 3, restartCount 1", crash)
	}
}

func TestBuildPodHostNetwork(t *testing.T) {
	tests := []struct {
		name     string
		hostNet  bool
		hostIPs  []string
		wantPod  []string
		wantHost []string
	}{
		{"host network takes the host's IP", true, []string{"192.0.2.7"}, []string{"192.0.2.7"}, []string{"192.0.2.7"}},
		{"pod network has no IP known here", false, []string{"192.0.2.7"}, nil, []string{"192.0.2.7"}},
		{"no host IP configured", true, nil, nil, nil},
		// --node-ip's dual-stack pair, in its order.
		{"host network, dual stack", true, []string{"2001:db8::7", "192.0.2.7"}, []string{"2001:db8::7", "192.0.2.7"}, []string{"2001:db8::7", "192.0.2.7"}},
		{"pod network, dual-stack host", false, []string{"192.0.2.7", "2001:db8::7"}, nil, []string{"192.0.2.7", "2001:db8::7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mkPod(t, podSpec{hostNet: tt.hostNet})
			in := newRecs(p, pod.TaskRunning).run("app", 0).input(nil)
			in.hostIPs = tt.hostIPs
			st := buildPod(in).Status
			var podIPs, hostIPs []string
			for _, ip := range st.PodIPs {
				podIPs = append(podIPs, ip.IP)
			}
			for _, ip := range st.HostIPs {
				hostIPs = append(hostIPs, ip.IP)
			}
			if !slices.Equal(podIPs, tt.wantPod) || !slices.Equal(hostIPs, tt.wantHost) {
				t.Errorf("podIPs, hostIPs = %v, %v, want %v, %v", podIPs, hostIPs, tt.wantPod, tt.wantHost)
			}
			if first := func(ips []string) string {
				if len(ips) == 0 {
					return ""
				}
				return ips[0]
			}; st.PodIP != first(tt.wantPod) || st.HostIP != first(tt.wantHost) {
				t.Errorf("podIP, hostIP = %q, %q, want the first of %v, %v", st.PodIP, st.HostIP, tt.wantPod, tt.wantHost)
			}
		})
	}
}

func TestPhase(t *testing.T) {
	run := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	ok := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}
	bad := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}
	fresh := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	backoff := v1.ContainerStatus{
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}},
	}
	cs := func(s ...v1.ContainerStatus) []v1.ContainerStatus { return s }
	const (
		A = v1.RestartPolicyAlways
		O = v1.RestartPolicyOnFailure
		N = v1.RestartPolicyNever
	)
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		init   bool
		inits  []v1.ContainerStatus
		apps   []v1.ContainerStatus
		want   v1.PodPhase
	}{
		{"not initialized", A, false, cs(run), cs(fresh), v1.PodPending},
		{"init failed under Always", A, false, cs(bad), cs(fresh), v1.PodPending},
		{"init failed under OnFailure", O, false, cs(bad), cs(fresh), v1.PodPending},
		{"init failed under Never", N, false, cs(bad), cs(fresh), v1.PodFailed},
		{"second init failed under Never", N, false, cs(ok, bad), cs(fresh), v1.PodFailed},
		{"init waiting under Never", N, false, cs(fresh), cs(fresh), v1.PodPending},
		{"all running", A, true, nil, cs(run, run), v1.PodRunning},
		{"one not started", A, true, nil, cs(run, fresh), v1.PodPending},
		{"back-off counts as running", A, true, nil, cs(backoff), v1.PodRunning},
		{"running and succeeded", N, true, nil, cs(run, ok), v1.PodRunning},
		{"running and failed", N, true, nil, cs(run, bad), v1.PodRunning},
		{"Always all exited", A, true, nil, cs(ok, bad), v1.PodRunning},
		{"OnFailure all succeeded", O, true, nil, cs(ok, ok), v1.PodSucceeded},
		{"OnFailure one failed", O, true, nil, cs(ok, bad), v1.PodRunning},
		{"Never all succeeded", N, true, nil, cs(ok), v1.PodSucceeded},
		{"Never one failed", N, true, nil, cs(ok, bad), v1.PodFailed},
		{"no containers", A, true, nil, nil, v1.PodPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := phase(tt.policy, tt.init, tt.inits, tt.apps); got != tt.want {
				t.Errorf("phase(%s) = %s, want %s", tt.name, got, tt.want)
			}
		})
	}
}

func TestInitializedFrom(t *testing.T) {
	ok := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}
	bad := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}
	run := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	fresh := v1.ContainerStatus{}
	started := v1.ContainerStatus{ContainerID: "containerd://x"}
	cs := func(s ...v1.ContainerStatus) []v1.ContainerStatus { return s }
	always := v1.ContainerRestartPolicyAlways
	regular, sidecar := v1.Container{}, v1.Container{RestartPolicy: &always}
	specs := func(c ...v1.Container) []v1.Container { return c }
	tests := []struct {
		name        string
		specs       []v1.Container
		inits, apps []v1.ContainerStatus
		want        bool
	}{
		{"no init containers", nil, nil, cs(fresh), true},
		{"all succeeded", specs(regular, regular), cs(ok, ok), cs(fresh), true},
		{"one running", specs(regular, regular), cs(ok, run), cs(fresh), false},
		{"one failed", specs(regular), cs(bad), cs(fresh), false},
		{"not started", specs(regular), cs(fresh), cs(fresh), false},
		{"app containers started", specs(regular), cs(fresh), cs(started), true},
		{"sidecar running", specs(sidecar, regular), cs(run, ok), cs(fresh), true},
		{"sidecar exited", specs(sidecar, regular), cs(ok, ok), cs(fresh), false},
	}
	for _, tt := range tests {
		if got := initializedFrom(tt.specs, tt.inits, tt.apps); got != tt.want {
			t.Errorf("initializedFrom(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestQOSClassOfDecodedPod(t *testing.T) {
	// Decoding copies limits to unset requests, as the apiserver does.
	p := mkPod(t, podSpec{resource: "    resources:\n      limits:\n        cpu: 100m\n        memory: 64Mi\n"})
	if got := buildPod(newRecs(p, pod.TaskRunning).input(nil)).Status.QOSClass; got != v1.PodQOSGuaranteed {
		t.Errorf("qosClass of a pod with limits only = %s, want Guaranteed", got)
	}
}

func TestBuildPodTerminationMessages(t *testing.T) {
	p := mkPod(t, podSpec{})
	r := newRecs(p, pod.TaskRunning).exit("app", 0, 1).run("app", 1)
	r.out[1].Message = "bye"
	cs := buildPod(r.input(nil)).Status.ContainerStatuses[0]
	if got := cs.LastTerminationState.Terminated; got == nil || got.Message != "bye" {
		t.Errorf("lastState.terminated = %+v, want message bye", got)
	}

	r = newRecs(p, pod.TaskRunning).exit("app", 0, 2)
	r.out[1].Message = "failed"
	if got := buildPod(r.input(nil)).Status.ContainerStatuses[0].State.Terminated; got == nil || got.Message != "failed" {
		t.Errorf("state.terminated = %+v, want message failed", got)
	}
}

func TestCapMessages(t *testing.T) {
	long := strings.Repeat("x", maxPodMessageBytes)
	term := func(msg string) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Message: msg}}
	}
	tests := []struct {
		name       string
		containers int
		msg        string
		want       int
	}{
		{"one container keeps 12 KiB", 1, long + "y", maxPodMessageBytes},
		{"three share it", 3, long, 4096},
		{"short messages stay", 4, "bye", 3},
		{"no containers", 0, "bye", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := v1.PodStatus{
				InitContainerStatuses: []v1.ContainerStatus{{State: term(tt.msg)}},
				ContainerStatuses:     []v1.ContainerStatus{{State: term(tt.msg), LastTerminationState: term(tt.msg)}, {}},
			}
			capMessages(&st, tt.containers)
			for _, got := range []string{
				st.InitContainerStatuses[0].State.Terminated.Message,
				st.ContainerStatuses[0].State.Terminated.Message,
				st.ContainerStatuses[0].LastTerminationState.Terminated.Message,
			} {
				if len(got) != tt.want || got != tt.msg[:tt.want] {
					t.Errorf("capMessages(%d containers) left %d bytes, want the first %d", tt.containers, len(got), tt.want)
				}
			}
		})
	}
}

// TestBuildPodOOMKilled: an OOM kill is the reason of an exit whatever its
// code, in state and in lastState.
func TestBuildPodOOMKilled(t *testing.T) {
	p := mkPod(t, podSpec{})
	r := newRecs(p, pod.TaskRunning).exit("app", 0, 137).run("app", 1)
	r.out[1].OOMKilled = true
	cs := buildPod(r.input(nil)).Status.ContainerStatuses[0]
	if got := cs.LastTerminationState.Terminated; got == nil || got.Reason != "OOMKilled" || got.ExitCode != 137 {
		t.Errorf("lastState.terminated = %+v, want OOMKilled with 137", got)
	}
	r = newRecs(p, pod.TaskRunning).exit("app", 0, 3)
	r.out[1].OOMKilled = true
	if got := buildPod(r.input(nil)).Status.ContainerStatuses[0].State.Terminated; got == nil || got.Reason != "OOMKilled" || got.ExitCode != 3 {
		t.Errorf("state.terminated = %+v, want OOMKilled with 3", got)
	}
}

// TestBuildPodEvicted: a container killed over its ephemeral storage
// limit ends with the kubelet's reason Evicted and its message, in place
// of any termination message, in state and in lastState.
func TestBuildPodEvicted(t *testing.T) {
	msg := `Container app exceeded its local ephemeral storage limit "4Mi". `
	p := mkPod(t, podSpec{})
	r := newRecs(p, pod.TaskRunning).exit("app", 0, 137).run("app", 1)
	r.out[1].Evicted, r.out[1].Message = msg, "written by the app"
	cs := buildPod(r.input(nil)).Status.ContainerStatuses[0]
	if got := cs.LastTerminationState.Terminated; got == nil || got.Reason != "Evicted" || got.Message != msg || got.ExitCode != 137 {
		t.Errorf("lastState.terminated = %+v, want Evicted with %q and 137", got, msg)
	}
	r = newRecs(p, pod.TaskRunning).exit("app", 0, 137)
	r.out[1].Evicted = msg
	if got := buildPod(r.input(nil)).Status.ContainerStatuses[0].State.Terminated; got == nil || got.Reason != "Evicted" || got.Message != msg {
		t.Errorf("state.terminated = %+v, want Evicted with %q", got, msg)
	}
}

// TestBuildPodLost: a container whose task containerd lost after it may
// have started ends as the kubelet ends one it cannot find, and its pod
// under restartPolicy Never fails.
func TestBuildPodLost(t *testing.T) {
	p := mkPod(t, podSpec{policy: v1.RestartPolicyNever})
	r := newRecs(p, pod.TaskExited).exit("app", 0, 137)
	r.out[1].Lost = true
	st := buildPod(r.input(nil)).Status
	if got := st.ContainerStatuses[0].State.Terminated; got == nil || got.Reason != "ContainerStatusUnknown" || got.ExitCode != 137 {
		t.Errorf("state.terminated = %+v, want ContainerStatusUnknown with 137", got)
	}
	if st.Phase != v1.PodFailed {
		t.Errorf("phase = %s, want Failed", st.Phase)
	}
}

// TestBuildPodDevices: the CDI devices a container was given show in its
// status by kind, as core/v1 reports a container's devices.
func TestBuildPodDevices(t *testing.T) {
	p := mkPod(t, podSpec{})
	r := newRecs(p, pod.TaskRunning).run("app", 0)
	r.out[1].Devices = []string{"vendor.test/cam=front", "example.test/dev=d1", "example.test/dev=d0"}
	got := buildPod(r.input(nil)).Status.ContainerStatuses[0].AllocatedResourcesStatus
	want := []v1.ResourceStatus{
		{Name: "example.test/dev", Resources: []v1.ResourceHealth{{ResourceID: "example.test/dev=d0", Health: "Unknown"}, {ResourceID: "example.test/dev=d1", Health: "Unknown"}}},
		{Name: "vendor.test/cam", Resources: []v1.ResourceHealth{{ResourceID: "vendor.test/cam=front", Health: "Unknown"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("allocatedResourcesStatus = %+v\nwant %+v", got, want)
	}
	r = newRecs(p, pod.TaskRunning).run("app", 0)
	if got := buildPod(r.input(nil)).Status.ContainerStatuses[0].AllocatedResourcesStatus; got != nil {
		t.Errorf("a container without devices: %+v", got)
	}
}
