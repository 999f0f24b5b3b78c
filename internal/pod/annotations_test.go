package pod

import (
	"slices"
	"testing"
)

// annotated is a pod with two hostPath volumes and an emptyDir, mounted
// by one container (one with a subPath), with annotations ann added.
func annotated(ann string) string {
	return `
apiVersion: v1
kind: Pod
metadata:
  name: haproxy
  annotations:
` + ann + `
spec:
  containers:
  - name: lb
    image: haproxy
    volumeMounts:
    - {name: conf, mountPath: /usr/local/etc/haproxy}
    - {name: certs, mountPath: /certs/tls.pem, subPath: tls.pem}
    - {name: scratch, mountPath: /tmp}
  volumes:
  - {name: conf, hostPath: {path: /etc/haproxy, type: Directory}}
  - {name: certs, hostPath: {path: /etc/ssl/lb/}}
  - {name: scratch, emptyDir: {}}
`
}

func TestOwnAnnotations(t *testing.T) {
	const rule = "staticlet's own"
	runValidateCases(t, []validateCase{
		{name: "after one pod", rule: rule, manifest: annotated(`    staticlet.io/after: etcd`)},
		{name: "after two pods", rule: rule, manifest: annotated(`    staticlet.io/after: "etcd, kube-apiserver"`)},
		{name: "after a bad name", rule: rule, manifest: annotated(`    staticlet.io/after: "Etcd_1"`),
			wantErr: []string{`metadata.annotations[staticlet.io/after]: "Etcd_1" is not a pod name`}},
		{name: "after itself", rule: rule, manifest: annotated(`    staticlet.io/after: haproxy`),
			wantErr: []string{`metadata.annotations[staticlet.io/after]: the pod names itself ("haproxy")`}},
		{name: "after nothing", rule: rule, manifest: annotated(`    staticlet.io/after: " , "`),
			wantErr: []string{`metadata.annotations[staticlet.io/after]: names no pod`}},
		{name: "an unknown staticlet annotation", rule: rule, manifest: annotated(`    staticlet.io/before: etcd`),
			wantErr: []string{`metadata.annotations[staticlet.io/before]: unknown staticlet annotation`}},
		{name: "restart on change: true", rule: rule, manifest: annotated(`    staticlet.io/restart-on-change: "true"`)},
		{name: "restart on change: false", rule: rule, manifest: annotated(`    staticlet.io/restart-on-change: "false"`)},
		{name: "restart on change: volumes", rule: rule, manifest: annotated(`    staticlet.io/restart-on-change: conf,certs`)},
		{name: "restart on change: a missing volume", rule: rule, manifest: annotated(`    staticlet.io/restart-on-change: confs`),
			wantErr: []string{`metadata.annotations[staticlet.io/restart-on-change]: names volume "confs", which the pod does not have`}},
		{name: "restart on change: not hostPath", rule: rule, manifest: annotated(`    staticlet.io/restart-on-change: scratch`),
			wantErr: []string{`names volume "scratch", which is not a hostPath, configMap, secret or projected volume`}},
		{name: "restart on change: empty", rule: rule, manifest: annotated(`    staticlet.io/restart-on-change: ""`),
			wantErr: []string{`metadata.annotations[staticlet.io/restart-on-change]: is empty`}},
	})
}

func TestWatchTargets(t *testing.T) {
	for _, tt := range []struct {
		ann  string
		want []WatchTarget
	}{
		{`    staticlet.io/restart-on-change: "true"`, []WatchTarget{
			{Container: "lb", Volume: "conf", Path: "/etc/haproxy"},
			{Container: "lb", Volume: "certs", Path: "/etc/ssl/lb/tls.pem"},
		}},
		{`    staticlet.io/restart-on-change: certs`, []WatchTarget{{Container: "lb", Volume: "certs", Path: "/etc/ssl/lb/tls.pem"}}},
		{`    staticlet.io/restart-on-change: "false"`, nil},
		{`    other: x`, nil},
	} {
		p := decodeOne(t, annotated(tt.ann), testOpts)
		if got := p.WatchTargets(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: WatchTargets() = %+v, want %+v", tt.ann, got, tt.want)
		}
	}
}

// TestOwnAnnotationsKeepThePod: staticlet's own annotations say how to
// run a pod, not what it is: changing one does not replace the pod.
func TestOwnAnnotationsKeepThePod(t *testing.T) {
	a := decodeOne(t, annotated(`    other: x`), testOpts)
	b := decodeOne(t, annotated("    other: x\n    staticlet.io/after: etcd"), testOpts)
	c := decodeOne(t, annotated(`    other: z`), testOpts)
	if a.SandboxHash != b.SandboxHash {
		t.Errorf("adding %s changed the sandbox hash", AnnotationAfter)
	}
	if a.SandboxHash == c.SandboxHash {
		t.Errorf("changing another annotation kept the sandbox hash")
	}
	if got := b.After(); !slices.Equal(got, []string{"etcd"}) {
		t.Errorf("After() = %q, want [etcd]", got)
	}
}
