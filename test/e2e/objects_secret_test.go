package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

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
	if evs := eventsOf(d, "broken-"+harness.TestNode, "Failed"); len(evs) == 0 || evs[0].Message != "couldn't find key nokey in Secret default/vault" {
		t.Errorf("Failed events of broken: %+v; want one naming the key and the Secret", evs)
	}
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
