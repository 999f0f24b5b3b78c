package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// waitingPods are pods that need ConfigMap late: envwait through an env
// variable, volwait through a volume; optwait uses it in both ways, as
// optional.
const waitingPods = `apiVersion: v1
kind: Pod
metadata:
  name: envwait
` + mainSleeper + `    env: [{name: LEVEL, valueFrom: {configMapKeyRef: {name: late, key: level}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: volwait
` + mainSleeper + `    volumeMounts: [{name: conf, mountPath: /etc/late}]
  volumes:
  - {name: conf, configMap: {name: late}}
---
apiVersion: v1
kind: Pod
metadata:
  name: optwait
` + mainSleeper + `    env: [{name: LEVEL, valueFrom: {configMapKeyRef: {name: late, key: level, optional: true}}}]
    volumeMounts: [{name: conf, mountPath: /etc/late}]
  volumes:
  - {name: conf, configMap: {name: late, optional: true}}
`

// TestObjectsMissingConfigMap: pods whose ConfigMap is missing wait with
// CreateContainerConfigError and an event naming it (and the key), their
// starts backing off, and start as soon as the ConfigMap's file appears,
// without waiting out that backoff. Once the ConfigMap is removed again,
// running containers keep their files, and one started again waits.
func TestObjectsMissingConfigMap(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("pods.yaml", waitingPods)
	opt := "optwait-" + harness.TestNode
	p := d.WaitPod(opt, time.Minute, "optwait running without its optional ConfigMap", harness.Running)
	optPid := containerPid(t, e, p, "main")
	if env := environOf(t, optPid); env["LEVEL"] != "" {
		t.Errorf("$LEVEL in optwait = %q, want it unset: its ConfigMap is missing", env["LEVEL"])
	}
	// Empty but for the atomic writer's ..data link and directory.
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/root/etc/late", optPid))
	for _, ent := range entries {
		if !strings.HasPrefix(ent.Name(), "..") {
			t.Errorf("/etc/late in optwait has %s, want no file: its ConfigMap is missing", ent.Name())
		}
	}
	if err != nil {
		t.Errorf("/etc/late in optwait: %v", err)
	}
	pods := map[string]string{ // the text each one's message has
		"envwait-" + harness.TestNode: `configmap "late" not found`,
		"volwait-" + harness.TestNode: `configmap "late" not found`,
	}
	for name, text := range pods {
		d.WaitPod(name, time.Minute, name+" waiting for its ConfigMap", func(p *v1.Pod) bool {
			w := firstWaiting(p)
			return p.Status.Phase == v1.PodPending && w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, text)
		})
	}
	// Each start that failed counts; the next is 16 s after the fifth
	// (1 s doubling from the second).
	for name, text := range pods {
		if evs := eventsOf(d, name, "Failed"); len(evs) == 0 || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, text) {
			t.Errorf("events Failed of %s: %+v, want a warning with %q", name, evs, text)
		}
		harness.WaitFor(t, time.Minute, name+" tried five times", func() (bool, string) {
			n := len(eventsOf(d, name, "Pulled"))
			return n >= 5, fmt.Sprintf("%d tries", n)
		})
	}

	e.Write("late.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late}\ndata: {level: debug}\n")
	written := time.Now()
	for name := range pods {
		p := d.WaitPod(name, 10*time.Second, name+" running once its ConfigMap is there", harness.Running)
		t.Logf("%s running %s after the ConfigMap's file was written", name, time.Since(written).Round(time.Millisecond))
		pid := containerPid(t, e, p, "main")
		if name == "envwait-"+harness.TestNode {
			if got := environOf(t, pid)["LEVEL"]; got != "debug" {
				t.Errorf("$LEVEL in %s = %q, want debug", name, got)
			}
		} else if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/late/level", pid)); string(b) != "debug" {
			t.Errorf("/etc/late/level in %s = %q (%v), want debug", name, b, err)
		}
	}
	// The optional volume fills in place; the variable waits for a
	// restart, as any variable does.
	harness.WaitFor(t, time.Minute, "optwait's volume filled", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/late/level", optPid))
		return string(b) == "debug", fmt.Sprint(err)
	})
	if p, err := d.Pod(opt); err != nil || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("optwait after its ConfigMap came: %v, %v; want it never restarted", err, p)
	}

	// The ConfigMap removed: the running containers keep their files and
	// run on, as with the kubelet; one started again waits for it.
	e.Remove("late.yaml")
	harness.WaitFor(t, time.Minute, "the ConfigMap gone", func() (bool, string) {
		out, err := d.CLI("get", "configmaps")
		return err == nil && !strings.Contains(out, "late"), out
	})
	vol := "volwait-" + harness.TestNode
	p, err = d.Pod(vol)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/late/level", containerPid(t, e, p, "main"))); string(b) != "debug" {
		t.Errorf("/etc/late/level in volwait after the ConfigMap went = %q (%v), want debug kept", b, err)
	}
	if out, err := d.CLI("restart", vol); err != nil {
		t.Fatalf("restart %s: %v\n%s", vol, err, out)
	}
	d.WaitPod(vol, time.Minute, "volwait waiting for its ConfigMap again", func(p *v1.Pod) bool {
		w := firstWaiting(p)
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, `configmap "late" not found`)
	})
}

// lbPod restarts container main when ConfigMap lb-config, which its
// volume conf holds, changes; container side mounts nothing.
const lbPod = `apiVersion: v1
kind: Pod
metadata:
  name: lb
  annotations: {staticlet.io/restart-on-change: conf}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "cat /etc/lb/lb.cfg; echo; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts:
    - {name: conf, mountPath: /etc/lb}
    - {name: frozen, mountPath: /etc/frozen}
  - name: side
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
  volumes:
  - {name: conf, configMap: {name: lb-config}}
  - {name: frozen, configMap: {name: frozen}}
`

// TestObjectsRestartOnChange: restart-on-change naming a configMap volume
// restarts the container that mounts it when the ConfigMap is edited, and
// no other; an edit of an immutable ConfigMap is refused with an error on
// its file, and the value in force stays.
func TestObjectsRestartOnChange(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	config := func(backend string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lb-config}\ndata:\n  lb.cfg: backend " + backend + "\n"
	}
	frozen := func(level string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: true\ndata: {level: " + level + "}\n"
	}
	e.Write("config.yaml", config("one"))
	e.Write("frozen.yaml", frozen("one"))
	e.Write("lb.yaml", lbPod)
	name := "lb-" + harness.TestNode
	p := d.WaitPod(name, time.Minute, "lb running", harness.Running)
	side := statusOf(p, "side").ContainerID

	e.Write("config.yaml", config("two"))
	p = d.WaitPod(name, time.Minute, "main restarted", func(p *v1.Pod) bool {
		return harness.Running(p) && statusOf(p, "main").RestartCount == 1
	})
	if cs := statusOf(p, "side"); cs.ContainerID != side || cs.RestartCount != 0 {
		t.Errorf("side: %s, restartCount %d; want %s, never restarted: it mounts no watched volume", cs.ContainerID, cs.RestartCount, side)
	}
	told := false
	for _, ev := range eventsOf(d, name, "Killing") {
		told = told || (ev.Container == "main" && strings.Contains(ev.Message, "lb-config"))
	}
	if !told {
		t.Errorf("no Killing event of main naming lb-config among %+v", eventsOf(d, name, "Killing"))
	}
	harness.WaitFor(t, 10*time.Second, "main's log to show the new file", func() (bool, string) {
		logs, err := d.CLI("logs", name, "-c", "main")
		return err == nil && strings.Contains(logs, "backend two"), logs
	})

	// An immutable ConfigMap's edit: refused, its file in error, the
	// old value in the container.
	e.Write("frozen.yaml", frozen("two"))
	harness.WaitFor(t, time.Minute, "the refusal on frozen.yaml", func() (bool, string) {
		out, _ := d.CLI("get", "manifests")
		return strings.Contains(out, "frozen.yaml") && strings.Contains(out, "immutable"), out
	})
	if out, _ := d.CLI("get", "manifests"); !strings.Contains(out, "configmap/default/lb-config") {
		t.Errorf("get manifests does not list ConfigMap lb-config:\n%s", out)
	}
	// diff of the refused edit says so too.
	out, err := d.CLI("diff", filepath.Join(e.Manifest, "frozen.yaml"))
	if code := harness.ExitCodeOf(err); code != 2 || !strings.Contains(out, "immutable") {
		t.Errorf("diff of the refused edit of frozen exited %d, want 2 with the refusal:\n%s", code, out)
	}
	// A pass after the refusal: another edit of lb-config, seen through
	// its file, shows what the pod holds now.
	e.Write("config.yaml", config("three"))
	p = d.WaitPod(name, time.Minute, "main restarted again", func(p *v1.Pod) bool {
		return harness.Running(p) && statusOf(p, "main").RestartCount == 2
	})
	for _, ev := range eventsOf(d, name, "Killing") {
		if !strings.Contains(ev.Message, "lb-config") {
			t.Errorf("Killing event %q: want only restarts for lb-config", ev.Message)
		}
	}
	pid := containerPid(t, e, p, "main")
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/frozen/level", pid)); string(b) != "one" {
		t.Errorf("/etc/frozen/level = %q (%v), want one: the edit of an immutable ConfigMap is refused", b, err)
	}
}

// readerPods read ConfigMap shared through a variable: reader in its
// namespace, outsider from another one.
const readerPods = `apiVersion: v1
kind: Pod
metadata:
  name: reader
` + mainSleeper + `    env: [{name: FROM, valueFrom: {configMapKeyRef: {name: shared, key: from}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: outsider
  namespace: kube-system
` + mainSleeper + `    env: [{name: FROM, valueFrom: {configMapKeyRef: {name: shared, key: from}}}]
`

// sharedConfigMap is ConfigMap shared, whose key from is from.
func sharedConfigMap(from string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {from: " + from + "}\n"
}

// TestObjectsAcrossSources: a pod in a file uses a ConfigMap that the
// manifest URL serves, a pod of another namespace does not see it, and
// the same ConfigMap in a file then wins over the URL's, whose result
// says so.
func TestObjectsAcrossSources(t *testing.T) {
	e := harness.NewEnv(t)
	srv := newPodServer(t, sharedConfigMap("url"))
	d := e.Start("--manifest-url", srv.url(), "--http-check-frequency", "1s")
	e.Write("readers.yaml", readerPods)
	name := "reader-" + harness.TestNode
	p := d.WaitPod(name, time.Minute, "reader running", harness.Running)
	if got := environOf(t, containerPid(t, e, p, "main"))["FROM"]; got != "url" {
		t.Errorf("$FROM in reader = %q, want url, the URL's ConfigMap", got)
	}
	d.WaitPod("outsider-"+harness.TestNode, time.Minute, "outsider waiting: the ConfigMap is default's", func(p *v1.Pod) bool {
		w := firstWaiting(p)
		return p.Namespace == "kube-system" && w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, `"shared" not found`)
	})

	e.Write("shared.yaml", sharedConfigMap("file"))
	harness.WaitFor(t, 30*time.Second, "the URL's ConfigMap ignored for the file's", func() (bool, string) {
		m := urlManifest(d, srv.url())
		return strings.Contains(m.Error, `ConfigMap "default/shared" is also defined in `+filepath.Join(e.Manifest, "shared.yaml")), m.Error
	})
	if out, err := d.CLI("restart", name); err != nil {
		t.Fatalf("restart %s: %v\n%s", name, err, out)
	}
	p = d.WaitPod(name, time.Minute, "reader restarted", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if got := environOf(t, containerPid(t, e, p, "main"))["FROM"]; got != "file" {
		t.Errorf("$FROM in reader after its restart = %q, want file: a file wins over the URL", got)
	}
}
