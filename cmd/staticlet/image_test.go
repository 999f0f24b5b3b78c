package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestMissingImage checks that a pod whose image is not on the node waits
// with the kubelet's reason and starts once its manifest names one that is.
func TestMissingImage(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	missing := func(policy string) string {
		return strings.Replace(sleeperPod("missing-"+strings.ToLower(policy), "x", true),
			"    image: localhost/busybox:test\n",
			"    image: 127.0.0.1:1/nothing:1\n    imagePullPolicy: "+policy+"\n", 1)
	}
	e.write("never.yaml", missing("Never"))
	e.write("ifnotpresent.yaml", missing("IfNotPresent"))

	waiting := func(reasons ...string) func(p *v1.Pod) bool {
		return func(p *v1.Pod) bool {
			w := p.Status.ContainerStatuses[0].State.Waiting
			for _, r := range reasons {
				if w != nil && w.Reason == r && strings.Contains(w.Message, "127.0.0.1:1/nothing:1") {
					return p.Status.Phase == v1.PodPending
				}
			}
			return false
		}
	}
	d.waitPod("missing-never-"+testNode, 30*time.Second, "ErrImageNeverPull", waiting("ErrImageNeverPull"))
	d.waitPod("missing-ifnotpresent-"+testNode, 30*time.Second, "ErrImagePull", waiting("ErrImagePull", "ImagePullBackOff"))
	d.waitPod("missing-ifnotpresent-"+testNode, 30*time.Second, "ImagePullBackOff", waiting("ImagePullBackOff"))
	out, _ := d.cli("get", "pods")
	if !strings.Contains(out, "ErrImageNeverPull") {
		t.Errorf("get pods =\n%s\nwant ErrImageNeverPull shown", out)
	}

	// Fixing the manifest starts the pod: the worker was not stuck.
	e.write("never.yaml", sleeperPod("missing-never", "x", true))
	d.waitPod("missing-never-"+testNode, 30*time.Second, "fixed pod running", running)
	if !d.running() {
		t.Fatal("staticlet exited")
	}
}
