package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// mainSleeper is the spec of a pod whose container main sleeps until
// SIGTERM; the fields of that container follow it.
const mainSleeper = `spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`

// podmanApp is a file as podman kube play takes it: a ConfigMap, a Secret
// and the Pod that uses them, one document each. @GREETING@ is the
// ConfigMap's greeting; @PASSWORD@ and @TOKEN64@ (base64) the Secret's.
const podmanApp = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  greeting: '@GREETING@'
  app.conf: |
    listen 8080
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
type: Opaque
stringData:
  password: '@PASSWORD@'
data:
  token: '@TOKEN64@'
---
apiVersion: v1
kind: Pod
metadata:
  name: app
` + mainSleeper + `    envFrom:
    - {prefix: CFG_, configMapRef: {name: app-config}}
    - {prefix: SEC_, secretRef: {name: app-secret}}
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: app-config, key: greeting}}}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: app-secret, key: password}}}
    - {name: CFG_app.conf, value: overridden}
    volumeMounts:
    - {name: config, mountPath: /etc/config}
    - {name: picked, mountPath: /etc/picked}
    - {name: secret, mountPath: /etc/secret}
    - {name: all, mountPath: /etc/all}
  volumes:
  - name: config
    configMap: {name: app-config, defaultMode: 0640}
  - name: picked
    configMap:
      name: app-config
      items: [{key: app.conf, path: conf/app.conf, mode: 0400}]
  - name: secret
    secret: {secretName: app-secret}
  - name: all
    projected:
      sources:
      - configMap: {name: app-config, items: [{key: greeting, path: greeting}]}
      - secret: {name: app-secret, items: [{key: password, path: creds/password, mode: 0400}]}
      - downwardAPI: {items: [{path: podname, fieldRef: {fieldPath: metadata.name}}]}
`

// podmanAppFile is podmanApp with its values.
func podmanAppFile(greeting, password, token64 string) string {
	return strings.NewReplacer("@GREETING@", greeting, "@PASSWORD@", password, "@TOKEN64@", token64).Replace(podmanApp)
}

// TestObjectsPodmanFile: a podman-style file of a ConfigMap, a Secret and
// a Pod runs, with the files, modes, mounts and environment the kubelet
// gives: the ..data layout, defaultMode and items' modes, secret and
// projected volumes on tmpfs, read-only volumes, env from keys and
// envFrom with prefixes (an explicit env winning). An edit of the
// ConfigMap reaches the mounted files of the running container, which
// keeps running (the same container, no restart) with its old
// environment until staticlet restart gives it the new one.
func TestObjectsPodmanFile(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	// "s3cr3t-token" in base64.
	e.Write("app.yaml", podmanAppFile("hello", "hunter2", "czNjcjN0LXRva2Vu"))
	name := "app-" + harness.TestNode
	p := d.WaitPod(name, time.Minute, "app running", harness.Running)
	first := p.Status.ContainerStatuses[0]
	pid := containerPid(t, e, p, "main")
	inRoot := func(pid int, path string) string { return fmt.Sprintf("/proc/%d/root%s", pid, path) }

	// The files, as the container sees them, with their modes.
	for _, f := range []struct {
		path, content string
		mode          fs.FileMode
	}{
		{"/etc/config/greeting", "hello", 0o640},
		{"/etc/config/app.conf", "listen 8080\n", 0o640},
		{"/etc/picked/conf/app.conf", "listen 8080\n", 0o400},
		{"/etc/secret/password", "hunter2", 0o644},
		{"/etc/secret/token", "s3cr3t-token", 0o644},
		{"/etc/all/greeting", "hello", 0o644},
		{"/etc/all/creds/password", "hunter2", 0o400},
		{"/etc/all/podname", name, 0o644},
	} {
		path := inRoot(pid, f.path)
		b, err := os.ReadFile(path)
		if err != nil || string(b) != f.content {
			t.Errorf("%s in the container = %q (%v), want %q", f.path, b, err, f.content)
		}
		if fi, err := os.Stat(path); err != nil {
			t.Error(err)
		} else if fi.Mode() != f.mode {
			t.Errorf("%s in the container has mode %v, want %v", f.path, fi.Mode(), f.mode)
		}
	}
	if _, err := os.Lstat(inRoot(pid, "/etc/picked/greeting")); !os.IsNotExist(err) {
		t.Errorf("/etc/picked/greeting: %v, want none: items picks app.conf alone", err)
	}
	// The kubelet's atomic writer: every visible name is a link through
	// ..data, itself a link to a timestamped directory.
	for _, dir := range []string{"/etc/config", "/etc/picked", "/etc/secret", "/etc/all"} {
		data, err := os.Readlink(inRoot(pid, dir+"/..data"))
		if err != nil || !strings.HasPrefix(data, "..20") {
			t.Errorf("%s/..data -> %q (%v), want a link to a timestamped ..20* directory", dir, data, err)
		}
		entries, err := os.ReadDir(inRoot(pid, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range entries {
			if strings.HasPrefix(ent.Name(), "..") {
				continue
			}
			if target, err := os.Readlink(inRoot(pid, dir+"/"+ent.Name())); err != nil || target != "..data/"+ent.Name() {
				t.Errorf("%s/%s -> %q (%v), want ..data/%s", dir, ent.Name(), target, err, ent.Name())
			}
		}
	}

	// The container's own /proc/mounts: secret and projected volumes are
	// tmpfs, a configMap volume is not; all of them are read-only.
	mounts, errOut, code := execStaticlet(d, nil, name, "--", "cat", "/proc/mounts")
	if code != 0 {
		t.Fatalf("exec cat /proc/mounts: exit %d, %s", code, errOut)
	}
	for point, tmpfs := range map[string]bool{"/etc/secret": true, "/etc/all": true, "/etc/config": false, "/etc/picked": false} {
		fsType, opts := procMount(mounts, point)
		if (fsType == "tmpfs") != tmpfs || !strings.HasPrefix(opts, "ro") {
			t.Errorf("%s in the container's /proc/mounts: type %q, options %q; want tmpfs %v, read-only", point, fsType, opts, tmpfs)
		}
	}
	if _, errOut, code := execStaticlet(d, nil, name, "--", "touch", "/etc/config/new"); code == 0 {
		t.Errorf("touch /etc/config/new in the container succeeded, want refused: %s", errOut)
	}

	// The environment: env from keys, envFrom with its prefixes, an
	// explicit env over envFrom's.
	env := environOf(t, pid)
	for k, want := range map[string]string{
		"GREETING":     "hello",
		"PASSWORD":     "hunter2",
		"CFG_greeting": "hello",
		"CFG_app.conf": "overridden",
		"SEC_password": "hunter2",
		"SEC_token":    "s3cr3t-token",
	} {
		if got, ok := env[k]; !ok || got != want {
			t.Errorf("$%s in the container = %q (set %v), want %q", k, got, ok, want)
		}
	}

	// describe names the objects, never a value.
	describe, err := d.CLI("describe", "pod", name)
	if err != nil {
		t.Fatalf("describe pod %s: %v\n%s", name, err, describe)
	}
	for _, want := range []string{
		"app-config  ConfigMap with prefix 'CFG_'",
		"GREETING:      <set to the key 'greeting' of config map 'app-config'>",
		"PASSWORD:      <set to the key 'password' in secret 'app-secret'>",
		"SecretName:  app-secret",
	} {
		if !strings.Contains(describe, want) {
			t.Errorf("describe pod %s lacks %q:\n%s", name, want, describe)
		}
	}
	if strings.Contains(describe, "hunter2") {
		t.Errorf("describe pod %s shows the Secret's value:\n%s", name, describe)
	}

	// diff of the edit first: how it will reach the pod.
	edit := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(edit, []byte(podmanAppFile("bonjour", "hunter2", "czNjcjN0LXRva2Vu")), 0o644); err != nil {
		t.Fatal(err)
	}
	diff, err := d.CLI("diff", edit)
	if code := harness.ExitCodeOf(err); code != 1 {
		t.Errorf("diff of the edit exited %d (%v), want 1:\n%s", code, err, diff)
	}
	for _, want := range []string{
		"configmap default/app-config: change",
		"key greeting: value changed",
		"secret default/app-secret: nothing",
		"pod default/" + name + ": nothing",
		"volume config: container main sees its files change in place",
		"env of container main: takes the new values at its next restart",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff of the edit lacks %q:\n%s", want, diff)
		}
	}

	// The edit: the files follow, in the same container.
	e.Write("app.yaml", podmanAppFile("bonjour", "hunter2", "czNjcjN0LXRva2Vu"))
	edited := time.Now()
	for _, path := range []string{"/etc/config/greeting", "/etc/all/greeting"} {
		harness.WaitFor(t, time.Minute, path+" to follow the edit", func() (bool, string) {
			b, err := os.ReadFile(inRoot(pid, path))
			return string(b) == "bonjour", fmt.Sprintf("%q, %v", b, err)
		})
	}
	t.Logf("the edit reached the container's files in %s", time.Since(edited).Round(time.Millisecond))
	p, err = d.Pod(name)
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != first.ContainerID || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("after the edit: %s, %s; want %s still running, never restarted", cs.ContainerID, harness.Describe(p), first.ContainerID)
	}
	env = environOf(t, pid)
	if env["GREETING"] != "hello" || env["CFG_greeting"] != "hello" {
		t.Errorf("after the edit, $GREETING = %q, $CFG_greeting = %q; want the old hello until a restart", env["GREETING"], env["CFG_greeting"])
	}

	// staticlet restart: a new container, with the new value.
	if out, err := d.CLI("restart", name); err != nil {
		t.Fatalf("restart %s: %v\n%s", name, err, out)
	}
	p = d.WaitPod(name, time.Minute, "app restarted", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return harness.Running(p) && cs.ContainerID != first.ContainerID && cs.RestartCount == 1
	})
	env = environOf(t, containerPid(t, e, p, "main"))
	if env["GREETING"] != "bonjour" || env["CFG_greeting"] != "bonjour" {
		t.Errorf("after the restart, $GREETING = %q, $CFG_greeting = %q; want bonjour", env["GREETING"], env["CFG_greeting"])
	}
}

// procMount is the type and options of the last mount on point in a
// /proc/mounts text.
func procMount(mounts, point string) (fsType, options string) {
	for _, line := range strings.Split(mounts, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[1] == point {
			fsType, options = f[2], f[3]
		}
	}
	return fsType, options
}

// environOf is the environment of process pid.
func environOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	env, err := harness.Environ(pid)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// firstWaiting is why p's first container waits; nil when it does not, or
// when p has no container status yet.
func firstWaiting(p *v1.Pod) *v1.ContainerStateWaiting {
	if len(p.Status.ContainerStatuses) == 0 {
		return nil
	}
	return p.Status.ContainerStatuses[0].State.Waiting
}

// TestObjectsAdopted: a staticlet killed and started again adopts a pod
// with configMap, secret and projected volumes as it is (the same
// container, its files and tmpfs mounts in place, no start), and then
// follows an edit of its ConfigMap as the first one did; an edit made
// while no staticlet ran reaches the files too.
func TestObjectsAdopted(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("app.yaml", podmanAppFile("hello", "hunter2", "czNjcjN0LXRva2Vu"))
	name := "app-" + harness.TestNode
	p := d.WaitPod(name, time.Minute, "app running", harness.Running)
	before := p.Status.ContainerStatuses[0]
	pid := containerPid(t, e, p, "main")
	podDir := filepath.Join(e.Root, "pods", string(p.UID))
	mounts := mountsUnder(t, podDir)

	d.Kill()
	e.Write("app.yaml", podmanAppFile("while-down", "hunter2", "czNjcjN0LXRva2Vu"))
	d = e.Start()
	p = d.WaitPod(name, time.Minute, "app adopted", harness.Running)
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != before.ContainerID || cs.RestartCount != 0 {
		t.Errorf("after the restart: %s, restartCount %d; want %s adopted as it was", cs.ContainerID, cs.RestartCount, before.ContainerID)
	}
	wantNoStarts(t, d)
	if got := mountsUnder(t, podDir); !slices.Equal(got, mounts) {
		t.Errorf("mounts in the pod's directory after the restart: %v, want %v", got, mounts)
	}
	for path, want := range map[string]string{"/etc/secret/password": "hunter2", "/etc/config/greeting": "while-down"} {
		harness.WaitFor(t, 30*time.Second, path+" in the adopted container", func() (bool, string) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, path))
			return string(b) == want, fmt.Sprintf("%q, %v", b, err)
		})
	}

	e.Write("app.yaml", podmanAppFile("after", "hunter2", "czNjcjN0LXRva2Vu"))
	harness.WaitFor(t, 30*time.Second, "/etc/config/greeting to follow the edit", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/config/greeting", pid))
		return string(b) == "after", fmt.Sprintf("%q, %v", b, err)
	})
	if p, err := d.Pod(name); err != nil || p.Status.ContainerStatuses[0].ContainerID != before.ContainerID {
		t.Errorf("after the edit: %v, %v; want container %s still", err, p, before.ContainerID)
	}
}

// nonRootPod runs as user 1000 with fsGroup 2000 and reads its Secret's
// files, mode 0400 by defaultMode, through its group.
const nonRootPod = `apiVersion: v1
kind: Secret
metadata:
  name: nonroot
stringData: {token: t0ken}
---
apiVersion: v1
kind: Pod
metadata:
  name: nonroot
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000}
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "cat /etc/token/token > /tmp/read; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: token, mountPath: /etc/token}]
  volumes:
  - {name: token, secret: {secretName: nonroot, defaultMode: 0400}}
`

// TestObjectsNonRoot: with an fsGroup, a secret volume's files belong to
// the group and are readable by it (0400 becomes 0440, as with the
// kubelet), so a container running as another user reads its Secret.
func TestObjectsNonRoot(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("nonroot.yaml", nonRootPod)
	p := d.WaitPod("nonroot-"+harness.TestNode, time.Minute, "nonroot running", harness.Running)
	pid := containerPid(t, e, p, "main")
	harness.WaitFor(t, 10*time.Second, "the container to read its token", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/tmp/read", pid))
		return string(b) == "t0ken", fmt.Sprintf("%q, %v", b, err)
	})
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/root/etc/token/token", pid))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o440 || st.Gid != 2000 {
		t.Errorf("/etc/token/token: mode %v, group %d; want 0440, 2000", fi.Mode().Perm(), st.Gid)
	}
}

// subPathPod mounts key greeting of ConfigMap sub alone, with subPath,
// and the whole volume beside it.
const subPathPod = `apiVersion: v1
kind: Pod
metadata:
  name: sub
` + mainSleeper + `    volumeMounts:
    - {name: conf, mountPath: /greeting, subPath: greeting}
    - {name: conf, mountPath: /etc/conf}
  volumes:
  - {name: conf, configMap: {name: sub}}
`

// TestObjectsSubPath: a ConfigMap's key mounted with subPath keeps the
// content it had at the container's start when the ConfigMap is edited,
// as with the kubelet, while the whole volume beside it follows the edit;
// the container runs on, and a restart mounts the new content.
func TestObjectsSubPath(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	config := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub}\ndata: {greeting: " + v + "}\n"
	}
	e.Write("sub-config.yaml", config("hello"))
	e.Write("sub.yaml", subPathPod)
	name := "sub-" + harness.TestNode
	p := d.WaitPod(name, time.Minute, "sub running", harness.Running)
	pid := containerPid(t, e, p, "main")
	read := func(pid int, path string) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, path))
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	if got := read(pid, "/greeting"); got != "hello" {
		t.Fatalf("/greeting = %q, want hello", got)
	}
	e.Write("sub-config.yaml", config("bonjour"))
	harness.WaitFor(t, time.Minute, "/etc/conf/greeting to follow the edit", func() (bool, string) {
		got := read(pid, "/etc/conf/greeting")
		return got == "bonjour", got
	})
	if got := read(pid, "/greeting"); got != "hello" {
		t.Errorf("/greeting after the edit = %q, want hello: a subPath mount keeps its content", got)
	}
	if out, err := d.CLI("restart", name); err != nil {
		t.Fatalf("restart %s: %v\n%s", name, err, out)
	}
	p = d.WaitPod(name, time.Minute, "sub restarted", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if got := read(containerPid(t, e, p, "main"), "/greeting"); got != "bonjour" {
		t.Errorf("/greeting after a restart = %q, want bonjour", got)
	}
}
