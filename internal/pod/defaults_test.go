package pod

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// decodeOne decodes a manifest that must hold exactly one valid pod.
func decodeOne(t *testing.T, manifest string, opts Options) *Pod {
	t.Helper()
	pods, err := Decode("test.yaml", []byte(manifest), opts)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(pods) != 1 {
		t.Fatalf("Decode = %d pods, want 1", len(pods))
	}
	return pods[0]
}

func TestDefaults(t *testing.T) {
	p := decodeOne(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  priorityClassName: system-node-critical
  hostNetwork: true
  initContainers:
  - name: init
    image: busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000
  containers:
  - name: latest
    image: nginx
    ports:
    - containerPort: 80
    env:
    - name: NODE
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
    livenessProbe:
      httpGet:
        port: 80
    resources:
      limits:
        cpu: 0.0001
        memory: 64Mi
  - name: tagged
    image: registry.example:5000/team/app:1.2
    readinessProbe:
      tcpSocket:
        port: 80
      periodSeconds: 5
  volumes:
  - name: scratch
  - name: host
    hostPath:
      path: /var/lib/x
`, testOpts)
	s := p.Spec
	c0, c1, ic := s.Containers[0], s.Containers[1], s.InitContainers[0]
	tests := []struct {
		name      string
		got, want any
	}{
		{"namespace", p.Namespace, "default"},
		{"restartPolicy", s.RestartPolicy, v1.RestartPolicyAlways},
		{"terminationGracePeriodSeconds", *s.TerminationGracePeriodSeconds, int64(30)},
		{"dnsPolicy", s.DNSPolicy, v1.DNSClusterFirst},
		{"schedulerName", s.SchedulerName, "default-scheduler"},
		{"enableServiceLinks", *s.EnableServiceLinks, true},
		{"securityContext", *s.SecurityContext, v1.PodSecurityContext{}},
		{"priority", *s.Priority, int32(2000001000)},
		{"nodeName", s.NodeName, "Node-1"},
		{"tolerations", s.Tolerations, []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}},
		{"untagged pull policy", c0.ImagePullPolicy, v1.PullAlways},
		{"tagged pull policy", c1.ImagePullPolicy, v1.PullIfNotPresent},
		{"digest pull policy", ic.ImagePullPolicy, v1.PullIfNotPresent},
		{"terminationMessagePath", c0.TerminationMessagePath, "/dev/termination-log"},
		{"init terminationMessagePolicy", ic.TerminationMessagePolicy, v1.TerminationMessageReadFile},
		{"port protocol", c0.Ports[0].Protocol, v1.ProtocolTCP},
		{"hostNetwork host port", c0.Ports[0].HostPort, int32(80)},
		{"fieldRef apiVersion", c0.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"probe timeout", c0.LivenessProbe.TimeoutSeconds, int32(1)},
		{"probe period", c0.LivenessProbe.PeriodSeconds, int32(10)},
		{"probe period kept", c1.ReadinessProbe.PeriodSeconds, int32(5)},
		{"probe success", c0.LivenessProbe.SuccessThreshold, int32(1)},
		{"probe failure", c0.LivenessProbe.FailureThreshold, int32(3)},
		{"httpGet path", c0.LivenessProbe.HTTPGet.Path, "/"},
		{"httpGet scheme", c0.LivenessProbe.HTTPGet.Scheme, v1.URISchemeHTTP},
		{"cpu limit rounded", c0.Resources.Limits.Cpu().String(), "1m"},
		{"requests from limits", c0.Resources.Requests.Memory().String(), "64Mi"},
		{"volume without source", s.Volumes[0].EmptyDir, &v1.EmptyDirVolumeSource{}},
		{"hostPath type", *s.Volumes[1].HostPath.Type, v1.HostPathUnset},
		{"kind", p.Kind, "Pod"},
		{"apiVersion", p.APIVersion, "v1"},
	}
	for _, tc := range tests {
		got, _ := json.Marshal(tc.got)
		want, _ := json.Marshal(tc.want)
		if string(got) != string(want) {
			t.Errorf("%s = %s, want %s", tc.name, got, want)
		}
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"nginx", v1.PullAlways},
		{"nginx:latest", v1.PullAlways},
		{"docker.io/library/nginx:latest", v1.PullAlways},
		{"localhost:5000/nginx", v1.PullAlways},
		{"localhost:5000/nginx:1.27", v1.PullIfNotPresent},
		{"nginx:1.27", v1.PullIfNotPresent},
		{"nginx@sha256:" + strings.Repeat("a", 64), v1.PullIfNotPresent},
		{"nginx:latest@sha256:" + strings.Repeat("a", 64), v1.PullAlways},
		{"Not A Reference", v1.PullIfNotPresent},
	}
	for _, tc := range tests {
		if got := defaultPullPolicy(tc.image); got != tc.want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", tc.image, got, tc.want)
		}
	}
}

func TestDefaultsKeepGivenValues(t *testing.T) {
	p := decodeOne(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  dnsPolicy: Default
  enableServiceLinks: false
  priorityClassName: system-cluster-critical
  tolerations:
  - operator: Exists
    effect: NoExecute
  containers:
  - name: web
    image: nginx
    imagePullPolicy: Never
    resources:
      requests:
        cpu: 100m
      limits:
        cpu: 200m
`, testOpts)
	s := p.Spec
	c := s.Containers[0]
	if p.Namespace != "kube-system" || s.RestartPolicy != v1.RestartPolicyNever || *s.TerminationGracePeriodSeconds != 5 ||
		s.DNSPolicy != v1.DNSDefault || *s.EnableServiceLinks || *s.Priority != 2000000000 || c.ImagePullPolicy != v1.PullNever {
		t.Errorf("given values were overwritten: %+v", s)
	}
	if len(s.Tolerations) != 1 {
		t.Errorf("tolerations = %v, want the given one only", s.Tolerations)
	}
	if q := c.Resources.Requests[v1.ResourceCPU]; q.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("cpu request = %s, want 100m", q.String())
	}
}

// TestDefaultServiceAccount checks the deprecated serviceAccount alias, as
// the apiserver's defaults keep it: it fills serviceAccountName, which
// wins when both are given; a pod without it does not gain it.
func TestDefaultServiceAccount(t *testing.T) {
	for _, tt := range []struct {
		spec             string
		name, deprecated string
	}{
		{"  serviceAccount: old\n", "old", "old"},
		{"  serviceAccount: old\n  serviceAccountName: new\n", "new", "new"},
		{"  serviceAccountName: new\n", "new", ""},
	} {
		p := decodeOne(t, podWith(tt.spec, ""), testOpts)
		if got, dep := p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount; got != tt.name || dep != tt.deprecated {
			t.Errorf("%q: serviceAccountName %q, serviceAccount %q; want %q, %q", tt.spec, got, dep, tt.name, tt.deprecated)
		}
	}
}
