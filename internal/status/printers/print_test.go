package printers

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func running(ready bool, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{
		Name: "c", Ready: ready, RestartCount: restarts,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ago(time.Minute)}},
	}
}

func waiting(reason string) v1.ContainerState {
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}
}

func terminated(reason string, code int32) v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: code}}
}

// rowPod builds a pod with the given number of init and app containers.
func rowPod(phase v1.PodPhase, inits, apps int) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Status: v1.PodStatus{Phase: phase}}
	for i := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init" + string(rune('a'+i))})
	}
	for i := range apps {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "app" + string(rune('a'+i))})
	}
	return p
}

func TestPodRow(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	started := true
	tests := []struct {
		name string
		pod  func() *v1.Pod
		want row
	}{
		{"running ready", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 0)}
			return p
		}, row{"1/1", "Running", "0"}},
		{"running not ready", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 2)
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 0), running(false, 0)}
			return p
		}, row{"1/2", "Running", "0"}},
		{"no status yet", func() *v1.Pod {
			return rowPod("", 0, 1)
		}, row{"0/1", "Pending", "0"}},
		{"container creating", func() *v1.Pod {
			p := rowPod(v1.PodPending, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: waiting("ContainerCreating")}}
			return p
		}, row{"0/1", "ContainerCreating", "0"}},
		{"image never pull", func() *v1.Pod {
			p := rowPod(v1.PodPending, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: waiting("ErrImageNeverPull")}}
			return p
		}, row{"0/1", "ErrImageNeverPull", "0"}},
		{"crash loop with last termination", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{{
				Name: "appa", RestartCount: 5, State: waiting("CrashLoopBackOff"),
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					ExitCode: 1, Reason: "Error", FinishedAt: ago(5 * time.Second)}},
			}}
			return p
		}, row{"0/1", "CrashLoopBackOff", "5 (5s ago)"}},
		{"first container's reason wins", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 2)
			p.Status.ContainerStatuses = []v1.ContainerStatus{
				{Name: "appa", State: waiting("CrashLoopBackOff")},
				{Name: "appb", State: waiting("ImagePullBackOff")},
			}
			return p
		}, row{"0/2", "CrashLoopBackOff", "0"}},
		{"completed", func() *v1.Pod {
			p := rowPod(v1.PodSucceeded, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: terminated("Completed", 0)}}
			return p
		}, row{"0/1", "Completed", "0"}},
		{"error", func() *v1.Pod {
			p := rowPod(v1.PodFailed, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: terminated("Error", 2)}}
			return p
		}, row{"0/1", "Error", "0"}},
		{"exit code without reason", func() *v1.Pod {
			p := rowPod(v1.PodFailed, 0, 1)
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: terminated("", 137)}}
			return p
		}, row{"0/1", "ExitCode:137", "0"}},
		{"completed next to running, ready", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 2)
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
			p.Status.ContainerStatuses = []v1.ContainerStatus{
				{Name: "appa", State: terminated("Completed", 0)}, running(true, 0)}
			return p
		}, row{"1/2", "Running", "0"}},
		{"completed next to running, not ready", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 2)
			p.Status.ContainerStatuses = []v1.ContainerStatus{
				{Name: "appa", State: terminated("Completed", 0)}, running(true, 0)}
			return p
		}, row{"1/2", "NotReady", "0"}},
		{"init 0/2", func() *v1.Pod {
			p := rowPod(v1.PodPending, 2, 1)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{
				{Name: "inita", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
				{Name: "initb", State: waiting("PodInitializing")},
			}
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: waiting("PodInitializing")}}
			return p
		}, row{"0/1", "Init:0/2", "0"}},
		{"init 1/2", func() *v1.Pod {
			p := rowPod(v1.PodPending, 2, 1)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{
				{Name: "inita", State: terminated("Completed", 0)},
				{Name: "initb", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
			}
			return p
		}, row{"0/1", "Init:1/2", "0"}},
		{"init crash loop", func() *v1.Pod {
			p := rowPod(v1.PodPending, 1, 1)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{
				{Name: "inita", RestartCount: 3, State: waiting("CrashLoopBackOff")}}
			return p
		}, row{"0/1", "Init:CrashLoopBackOff", "3"}},
		{"init error", func() *v1.Pod {
			p := rowPod(v1.PodFailed, 1, 1)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "inita", State: terminated("Error", 1)}}
			return p
		}, row{"0/1", "Init:Error", "0"}},
		{"init exit code", func() *v1.Pod {
			p := rowPod(v1.PodPending, 1, 1)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "inita", State: terminated("", 3)}}
			return p
		}, row{"0/1", "Init:ExitCode:3", "0"}},
		{"sidecar counts as app container", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 1, 1)
			p.Spec.InitContainers[0].RestartPolicy = &always
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{
				Name: "inita", Ready: true, Started: &started, RestartCount: 2,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}}
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 1)}
			return p
		}, row{"2/2", "Running", "3"}},
		{"terminating", func() *v1.Pod {
			p := rowPod(v1.PodRunning, 0, 1)
			ts := ago(time.Second)
			p.DeletionTimestamp = &ts
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 0)}
			return p
		}, row{"1/1", "Terminating", "0"}},
		{"terminated pod being deleted keeps its reason", func() *v1.Pod {
			p := rowPod(v1.PodSucceeded, 0, 1)
			ts := ago(time.Second)
			p.DeletionTimestamp = &ts
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "appa", State: terminated("Completed", 0)}}
			return p
		}, row{"0/1", "Completed", "0"}},
		{"status reason", func() *v1.Pod {
			p := rowPod(v1.PodFailed, 0, 1)
			p.Status.Reason = "Evicted"
			return p
		}, row{"0/1", "Evicted", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podRow(tt.pod(), now); got != tt.want {
				t.Errorf("podRow() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAge(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{5 * time.Second, "5s"},
		{200 * time.Second, "3m20s"},
		{52 * time.Hour, "2d4h"},
		{400 * 24 * time.Hour, "400d"},
	}
	for _, tt := range tests {
		if got := age(now.Add(-tt.d), now); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := age(time.Time{}, now); got != "<unknown>" {
		t.Errorf("age(zero) = %q, want <unknown>", got)
	}
}

func TestPods(t *testing.T) {
	p1 := rowPod(v1.PodRunning, 0, 1)
	p1.Name = "etcd-node1"
	p1.Spec.NodeName = "node1"
	p1.Status.PodIP = "10.0.0.1"
	start := ago(200 * time.Second)
	p1.Status.StartTime = &start
	p1.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 0)}
	p2 := rowPod(v1.PodPending, 0, 1)
	p2.Name = "web"
	p2.CreationTimestamp = ago(5 * time.Second)

	var b bytes.Buffer
	if err := Pods(&b, []v1.Pod{*p1, *p2}, false, now); err != nil {
		t.Fatal(err)
	}
	want := `NAME         READY   STATUS    RESTARTS   AGE
etcd-node1   1/1     Running   0          3m20s
web          0/1     Pending   0          5s
`
	if b.String() != want {
		t.Errorf("Pods() =\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := Pods(&b, []v1.Pod{*p1, *p2}, true, now); err != nil {
		t.Fatal(err)
	}
	want = `NAME         READY   STATUS    RESTARTS   AGE     IP         NODE
etcd-node1   1/1     Running   0          3m20s   10.0.0.1   node1
web          0/1     Pending   0          5s      <none>     <none>
`
	if b.String() != want {
		t.Errorf("Pods(wide) =\n%s\nwant\n%s", b.String(), want)
	}
}

func TestManifests(t *testing.T) {
	var b bytes.Buffer
	err := Manifests(&b, []status.Manifest{
		{Source: "/m", Path: "/m/etcd.yaml", Pods: []string{"kube-system/etcd-n1"}},
		{Source: "/m", Path: "/m/bad.yaml", Error: "line 3: unknown field\n  \"spec.foo\""},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `PATH           PODS                  ERROR
/m/etcd.yaml   kube-system/etcd-n1   <none>
/m/bad.yaml    <none>                line 3: unknown field "spec.foo"
`
	if b.String() != want {
		t.Errorf("Manifests() =\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	Manifests(&b, []status.Manifest{
		{Source: "/m", Path: "/m/app.yaml", Pods: []string{"default/app-n1"}, Objects: []string{"configmap/default/app", "secret/default/app"}},
		{Source: "/m", Path: "/m/etcd.yaml", Pods: []string{"kube-system/etcd-n1"}},
	})
	want = `PATH           PODS                  OBJECTS                                    ERROR
/m/app.yaml    default/app-n1        configmap/default/app,secret/default/app   <none>
/m/etcd.yaml   kube-system/etcd-n1   <none>                                     <none>
`
	if b.String() != want {
		t.Errorf("Manifests() with objects =\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	Manifests(&b, []status.Manifest{{Source: "/m", Path: "/m/a.yaml"}, {Source: "http://x/", Path: "http://x/"}})
	if !strings.HasPrefix(b.String(), "SOURCE ") {
		t.Errorf("Manifests() with two sources =\n%s\nwant a SOURCE column", b.String())
	}

	// A URL that stopped answering shows when it last worked.
	b.Reset()
	// Twenty minutes print without seconds, so a slow test sees the same.
	last := time.Now().Add(-20 * time.Minute)
	Manifests(&b, []status.Manifest{{Source: "url:http://x/", Path: "http://x/", Pods: []string{"default/a-n1"},
		Error: "fetching http://x/: 503 Service Unavailable", LastSuccess: last}})
	if want := "503 Service Unavailable (last success 20m ago, at " + last.Format(time.RFC3339) + ")"; !strings.Contains(b.String(), want) {
		t.Errorf("Manifests() with a failing URL =\n%s\nwant %q", b.String(), want)
	}
}

func TestObject(t *testing.T) {
	p := rowPod(v1.PodRunning, 0, 1)
	var b bytes.Buffer
	if err := Object(&b, p, "yaml"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "name: p\n") {
		t.Errorf("Object(yaml) =\n%s\nwant name: p", b.String())
	}
	b.Reset()
	if err := Object(&b, p, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `    "metadata": {`) {
		t.Errorf("Object(json) =\n%s\nwant indented metadata", b.String())
	}
	if err := Object(&b, p, "xml"); err == nil {
		t.Errorf("Object(xml) succeeded, want an error")
	}
}

func TestDescribeProbe(t *testing.T) {
	svc := "health"
	tests := []struct {
		probe v1.Probe
		want  string
	}{
		{v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: "127.0.0.1", Port: intstr.FromInt32(2381), Path: "/health", Scheme: v1.URISchemeHTTP}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 8},
			"http-get http://127.0.0.1:2381/health delay=10s timeout=15s period=10s #success=1 #failure=8"},
		{v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Port: intstr.FromString("http"), Path: "/", Scheme: v1.URISchemeHTTPS}},
			TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
			"http-get https://:http/ delay=0s timeout=1s period=10s #success=1 #failure=3"},
		{v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/ok"}}}},
			"exec [cat /ok] delay=0s timeout=0s period=0s #success=0 #failure=0"},
		{v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}},
			"tcp-socket :80 delay=0s timeout=0s period=0s #success=0 #failure=0"},
		{v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000, Service: &svc}}},
			"grpc <pod>:9000 health delay=0s timeout=0s period=0s #success=0 #failure=0"},
		{v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000}}},
			"grpc <pod>:9000 delay=0s timeout=0s period=0s #success=0 #failure=0"},
	}
	for _, tt := range tests {
		if got := describeProbe(&tt.probe); got != tt.want {
			t.Errorf("describeProbe() = %q, want %q", got, tt.want)
		}
	}
}

func TestDescribePod(t *testing.T) {
	dirOrCreate := v1.HostPathDirectoryOrCreate
	start := ago(time.Hour)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "kube-system", Name: "etcd-node1",
			Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
			Annotations: map[string]string{"kubernetes.io/config.source": "file"},
		},
		Spec: v1.PodSpec{
			NodeName: "node1",
			Containers: []v1.Container{{
				Name: "etcd", Image: "registry.k8s.io/etcd:3.5.9-0",
				Command: []string{"etcd", "--data-dir=/var/lib/etcd"},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi")}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
					Host: "127.0.0.1", Port: intstr.FromInt32(2381), Path: "/health", Scheme: v1.URISchemeHTTP}},
					InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 8},
				Env:          []v1.EnvVar{{Name: "A", Value: "b"}},
				VolumeMounts: []v1.VolumeMount{{Name: "etcd-data", MountPath: "/var/lib/etcd"}},
			}},
			Volumes: []v1.Volume{{Name: "etcd-data", VolumeSource: v1.VolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/etcd", Type: &dirOrCreate}}}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.0.0.1",
			PodIPs:    []v1.PodIP{{IP: "10.0.0.1"}},
			StartTime: &start,
			Conditions: []v1.PodCondition{
				{Type: v1.PodInitialized, Status: v1.ConditionTrue},
				{Type: v1.PodReady, Status: v1.ConditionTrue},
			},
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "etcd", Ready: true, RestartCount: 1, ContainerID: "containerd://abc",
				Image: "registry.k8s.io/etcd:3.5.9-0", ImageID: "registry.k8s.io/etcd@sha256:123",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ago(30 * time.Minute)}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					Reason: "Error", ExitCode: 1, StartedAt: ago(time.Hour), FinishedAt: ago(31 * time.Minute)}},
			}},
		},
	}
	events := []pod.Event{
		{Time: now.Add(-40 * time.Minute), Pod: "kube-system/etcd-node1", Type: pod.EventNormal, Reason: "Started", Message: "Started container etcd"},
		{Time: now.Add(-35 * time.Minute), Pod: "kube-system/etcd-node1", Type: pod.EventWarning, Reason: "BackOff", Message: "Back-off restarting failed container etcd"},
		{Time: now.Add(-30 * time.Minute), Pod: "kube-system/etcd-node1", Type: pod.EventNormal, Reason: "Started", Message: "Started container etcd"},
	}
	var b bytes.Buffer
	if err := DescribePod(&b, p, events, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Name:         etcd-node1\n",
		"Namespace:    kube-system\n",
		"Node:         node1/10.0.0.1\n",
		"Start Time:   Wed, 01 May 2024 11:00:00 +0000\n",
		"Labels:       component=etcd\n              tier=control-plane\n",
		"Annotations:  kubernetes.io/config.source: file\n",
		"Status:       Running\n",
		"IPs:\n  IP:  10.0.0.1\n",
		"Containers:\n  etcd:\n",
		"    Container ID:  containerd://abc\n",
		"    Image ID:      registry.k8s.io/etcd@sha256:123\n",
		"    Port:          <none>\n",
		"    Command:\n      etcd\n      --data-dir=/var/lib/etcd\n",
		"    State:          Running\n      Started:      Wed, 01 May 2024 11:30:00 +0000\n",
		"    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    1\n",
		"    Ready:          True\n    Restart Count:  1\n",
		"    Requests:\n      cpu:     100m\n      memory:  100Mi\n",
		"    Liveness:  http-get http://127.0.0.1:2381/health delay=10s timeout=15s period=10s #success=1 #failure=8\n",
		"    Environment:\n      A:  b\n",
		"    Mounts:\n      /var/lib/etcd from etcd-data (rw)\n",
		"Conditions:\n  Type          Status\n  Initialized   True \n  Ready         True \n",
		"Volumes:\n  etcd-data:\n    Type:          HostPath (bare host directory volume)\n",
		"QoS Class:         Burstable\n",
		"Events:\n  Type     Reason   Age                From       Message\n",
		"  Warning  BackOff  35m                staticlet  Back-off restarting failed container etcd\n",
		"  Normal   Started  30m (x2 over 10m)  staticlet  Started container etcd\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DescribePod() output lacks %q; got:\n%s", want, out)
		}
	}

	b.Reset()
	if err := DescribePod(&b, rowPod(v1.PodPending, 0, 1), nil, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Events:") || !strings.Contains(b.String(), "<none>") {
		t.Errorf("DescribePod() of a bare pod:\n%s\nwant Events: <none>", b.String())
	}
}

// TestDescribePodObjects: describe names the ConfigMaps and Secrets a pod
// uses, as kubectl does: envFrom sources, env from keys, and configMap,
// secret, projected and downwardAPI volumes.
func TestDescribePodObjects(t *testing.T) {
	yes := true
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-node1"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "app", Image: "app:1",
				EnvFrom: []v1.EnvFromSource{
					{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}},
					{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-secret"}, Optional: &yes}},
				},
				Env: []v1.EnvVar{
					{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
						LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Key: "level"}}},
					{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
						LocalObjectReference: v1.LocalObjectReference{Name: "app-secret"}, Key: "password", Optional: &yes}}},
				},
			}},
			Volumes: []v1.Volume{
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app-secret", Optional: &yes}}},
				{Name: "all", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}},
					{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app-secret"}}},
					{DownwardAPI: &v1.DownwardAPIProjection{}},
				}}}},
				{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
					{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu"}},
				}}}},
			},
		},
	}
	var b bytes.Buffer
	if err := DescribePod(&b, p, nil, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"    Environment Variables from:\n      app-config  ConfigMap with prefix 'CFG_'  Optional: false\n      app-secret  Secret                        Optional: true\n",
		"      LEVEL:     <set to the key 'level' of config map 'app-config'>  Optional: false\n",
		"      PASSWORD:  <set to the key 'password' in secret 'app-secret'>   Optional: true\n",
		"  config:\n    Type:      ConfigMap (a volume populated by a ConfigMap)\n    Name:      app-config\n    Optional:  false\n",
		"  creds:\n    Type:        Secret (a volume populated by a Secret)\n    SecretName:  app-secret\n    Optional:    true\n",
		"    Type:                Projected (a volume that contains injected data from multiple sources)\n    ConfigMapName:       app-config\n    ConfigMapOptional:   false\n    SecretName:          app-secret\n    SecretOptionalName:  false\n    DownwardAPI:         true\n",
		"    Type:  DownwardAPI (a volume populated by information about the pod)\n    Items:\n      metadata.name -> name\n      requests.cpu -> cpu\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DescribePod() output lacks %q; got:\n%s", want, out)
		}
	}
}
