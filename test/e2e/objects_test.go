package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
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
// and the Pod that uses them, one document each. GREETING is the
// ConfigMap's greeting; PASSWORD and TOKEN64 (base64) the Secret's.
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
		if fi, err := os.Stat(path); err != nil || fi.Mode() != f.mode {
			t.Errorf("%s in the container has mode %v (%v), want %v", f.path, fi.Mode(), err, f.mode)
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

// vaultFile is a Secret and two pods that use it: vault, through a secret
// volume, a secretKeyRef and envFrom; broken, through a key the Secret
// lacks (a CreateContainerConfigError). @VALUE@ is the value of key
// password; keys tls.key and api.token come from a file and from a
// systemd credential.
const vaultFile = `apiVersion: v1
kind: Secret
metadata:
  name: vault
  annotations:
    staticlet.io/secret-files: tls.key=@KEYFILE@
    staticlet.io/secret-credentials: api.token=api-token
stringData:
  password: '@VALUE@'
---
apiVersion: v1
kind: Pod
metadata:
  name: vault
` + mainSleeper + `    envFrom: [{prefix: V_, secretRef: {name: vault}}]
    env: [{name: PASSWORD, valueFrom: {secretKeyRef: {name: vault, key: password}}}]
    volumeMounts: [{name: creds, mountPath: /etc/creds}]
  volumes:
  - {name: creds, secret: {secretName: vault, defaultMode: 0400}}
---
apiVersion: v1
kind: Pod
metadata:
  name: broken
` + mainSleeper + `    env: [{name: NOPE, valueFrom: {secretKeyRef: {name: vault, key: nokey}}}]
`

// TestObjectsSecretStaysSecret plants secret values (in the manifest, in
// a file and in a systemd credential that a Secret's annotations name)
// and looks for them everywhere staticlet writes: its log (at debug
// level), events, the status socket's pods, manifests and metrics, the
// metrics port, get, describe, diff, and the files under --root-dir and
// the pod logs directory. It finds them in the container alone, whose
// secret volume is a tmpfs on the host too.
func TestObjectsSecretStaysSecret(t *testing.T) {
	e := harness.NewEnv(t)
	planted := map[string]string{
		"manifest":   "planted-manifest-7Gq2",
		"edited":     "planted-edited-3Xv9",
		"diffed":     "planted-diffed-8Kw1",
		"file":       "planted-file-5Rt6",
		"credential": "planted-credential-2Lm4",
		"rotated":    "planted-rotated-6Jn8",
		"url":        "planted-url-4Wc5",
	}
	keyFile := filepath.Join(e.Dir, "tls.key")
	creds := filepath.Join(e.Dir, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	for path, v := range map[string]string{keyFile: planted["file"], filepath.Join(creds, "api-token"): planted["credential"]} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.ExtraEnv = append(e.ExtraEnv, "CREDENTIALS_DIRECTORY="+creds)
	vault := func(value string) string {
		return strings.NewReplacer("@VALUE@", value, "@KEYFILE@", keyFile).Replace(vaultFile)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	// The URL serves a Secret too: a body with one is not kept on disk.
	srv := newPodServer(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: remote}\nstringData: {token: "+planted["url"]+"}\n")
	d := e.Start("--metrics-address", metricsAddr, "--manifest-url", srv.url(), "--http-check-frequency", "1s")
	e.Write("vault.yaml", vault(planted["manifest"]))
	name := "vault-" + harness.TestNode
	p := d.WaitPod(name, time.Minute, "vault running", harness.Running)
	d.WaitPod("broken-"+harness.TestNode, time.Minute, "broken waiting on its key", func(p *v1.Pod) bool {
		w := firstWaiting(p)
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "nokey")
	})
	pid := containerPid(t, e, p, "main")

	// The values reach the container: what follows is no empty check.
	env := environOf(t, pid)
	for k, want := range map[string]string{"PASSWORD": planted["manifest"], "V_tls.key": planted["file"], "V_api.token": planted["credential"]} {
		if env[k] != want {
			t.Errorf("$%s in the container = %q, want %q", k, env[k], want)
		}
	}
	// An edit reaches the files, as the kubelet's resync would.
	e.Write("vault.yaml", vault(planted["edited"]))
	harness.WaitFor(t, time.Minute, "the edited password in the container", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/creds/password", pid))
		return string(b) == planted["edited"], fmt.Sprintf("%v", err)
	})
	// A file the Secret reads, renewed: its volume follows, as after an
	// edit of the Secret.
	writeFileAtomic(t, filepath.Dir(keyFile), filepath.Base(keyFile), []byte(planted["rotated"]))
	harness.WaitFor(t, time.Minute, "the renewed tls.key in the container", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/creds/tls.key", pid))
		return string(b) == planted["rotated"], fmt.Sprintf("%v", err)
	})
	for file, want := range map[string]string{"tls.key": planted["rotated"], "api.token": planted["credential"]} {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/creds/%s", pid, file)); string(b) != want {
			t.Errorf("/etc/creds/%s in the container = %q (%v), want %q", file, b, err, want)
		}
	}

	harness.WaitFor(t, 30*time.Second, "the URL's Secret in force", func() (bool, string) {
		out, err := d.CLI("get", "secrets")
		return err == nil && strings.Contains(out, "remote"), out
	})

	// The secret volume is a tmpfs on the host.
	volume := filepath.Join(e.Root, "pods", string(p.UID), "volumes", "secret", "creds")
	if m := mountOn(t, "/proc/self/mountinfo", volume); m.fsType != "tmpfs" {
		t.Errorf("%s on the host is %+v, want a tmpfs", volume, m)
	}

	// What staticlet tells, every way it tells it.
	told := map[string]string{}
	diffDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(diffDir, "vault.yaml"), []byte(vault(planted["diffed"])), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"get", "pods", "-o", "yaml"},
		{"get", "pods", "-o", "json"},
		{"get", "manifests"},
		{"get", "events"},
		{"describe", "pod", name},
		{"describe", "pod", "broken-" + harness.TestNode},
		{"diff", filepath.Join(diffDir, "vault.yaml")},
		{"get", "secrets", "-o", "yaml"},
		{"get", "secrets", "-o", "json"},
		{"get", "secrets", "-o", "wide"},
		{"describe", "secret", "vault"},
	} {
		out, err := d.CLI(args...)
		if code := harness.ExitCodeOf(err); code > 1 {
			t.Errorf("staticlet %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		told["staticlet "+strings.Join(args, " ")] = out
	}
	for _, path := range []string{"/pods", "/manifests", "/events", "/metrics", "/secrets", "/secrets/default/vault"} {
		told["GET "+path+" on the socket"] = socketGet(t, d.Socket, path)
	}
	told["GET /metrics on --metrics-address"] = httpGet(t, "http://"+metricsAddr+"/metrics")
	// diff tells the value changed without showing it.
	if diff := told["staticlet diff "+filepath.Join(diffDir, "vault.yaml")]; !strings.Contains(diff, "secret default/vault: change") ||
		!strings.Contains(diff, "key password: value changed") {
		t.Errorf("diff of the Secret with a new password does not tell it changed:\n%s", diff)
	}
	for _, dir := range []string{e.Root, e.Logs} {
		for path, content := range harness.FilesOnDisk(t, dir) {
			told[path] = content
		}
	}

	// The pod gone, so is its tmpfs.
	e.Remove("vault.yaml")
	waitGone(d, name)
	if m := mountsUnder(t, filepath.Join(e.Root, "pods", string(p.UID))); len(m) != 0 {
		t.Errorf("mounts left in the removed pod's directory: %v", m)
	}
	told["staticlet's log"] = d.Out.String()
	for where, text := range told {
		for what, v := range planted {
			if strings.Contains(text, v) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(v))) {
				t.Errorf("the %s secret value is in %s", what, where)
			}
		}
	}
}

// socketGet is the body of GET path on the status socket.
func socketGet(t *testing.T, socket, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	defer c.CloseIdleConnections()
	return getBody(t, c, "http://staticlet"+path)
}

// httpGet is the body of GET url.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	return getBody(t, &http.Client{Timeout: 10 * time.Second}, url)
}

func getBody(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

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
