package cli

import (
	"bytes"
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

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// plantedValue is a Secret value that no output may show.
const plantedValue = "planted-s3cr3t-value"

// objectsManifest defines a ConfigMap, and Secrets in two namespaces, one
// holding plantedValue.
const objectsManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  app.conf: |
    level=debug
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
stringData:
  password: ` + plantedValue + `
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: other
stringData:
  password: other
`

// objectsDaemon serves, on a socket in a temporary directory, the status
// of a staticlet whose manifest directory /m holds files (path ->
// manifest), their pods and objects in force; it returns the socket's
// path.
func objectsDaemon(t *testing.T, files map[string]string) string {
	t.Helper()
	store := status.NewStore()
	var (
		ms   []status.Manifest
		objs []*pod.Object
	)
	for path, content := range files {
		m, err := pod.DecodeFile(path, []byte(content), pod.Options{NodeName: "n1", Seen: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		sm := status.Manifest{Source: "dir:/m", Path: path}
		for _, p := range m.Pods {
			store.SetPod(p.Pod)
			sm.Pods = append(sm.Pods, p.Key().String())
		}
		for _, o := range m.Objects {
			sm.Objects = append(sm.Objects, o.Key().String())
		}
		ms = append(ms, sm)
		objs = append(objs, m.Objects...)
	}
	store.SetManifests(ms)
	store.SetObjects(objs)
	return serveStore(t, store)
}

// runCLI runs staticlet with args and returns its output and exit code.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := rootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		out.WriteString(Message(err) + "\n")
		return out.String(), ExitCode(err)
	}
	return out.String(), 0
}

// checkOutput fails t unless out holds every string of want and none of
// not.
func checkOutput(t *testing.T, out string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, n := range not {
		if strings.Contains(out, n) {
			t.Errorf("output has %q:\n%s", n, out)
		}
	}
}

func TestObjectCommands(t *testing.T) {
	socket := objectsDaemon(t, map[string]string{"/m/app.yaml": objectsManifest})
	tests := []struct {
		args      []string
		code      int
		want, not []string
	}{
		{args: []string{"get", "configmaps"}, want: []string{"NAMESPACE", "default", "app-config", "/m/app.yaml:1"}},
		{args: []string{"get", "cm", "app-config", "-o", "yaml"}, want: []string{"kind: ConfigMap", "level=debug", "staticlet.io/source: /m/app.yaml:1"}},
		{args: []string{"get", "secrets"}, want: []string{"TYPE", "default", "other", "Opaque"}},
		{args: []string{"get", "secrets", "-n", "other"}, want: []string{"other"}, not: []string{"default"}},
		{args: []string{"get", "secret", "app-secret", "-o", "wide"}, want: []string{"password(20)"}, not: []string{"other"}},
		{args: []string{"get", "secret", "other/app-secret", "-o", "json"}, want: []string{`"kind": "Secret"`, `"staticlet.io/keys": "password=5"`}, not: []string{`"data"`}},
		{args: []string{"get", "secrets", "-o", "yaml"}, want: []string{"kind: SecretList", "staticlet.io/keys: password=20"}, not: []string{" data:"}},
		{args: []string{"describe", "secret", "app-secret"}, want: []string{"Type:  Opaque", "password:  20 bytes"}},
		{args: []string{"describe", "cm", "app-config"}, want: []string{"app.conf:\n----\nlevel=debug"}},
		{args: []string{"describe", "secret", "nothing"}, code: 1, want: []string{`secret "nothing" not found`}},
		{args: []string{"get", "manifests"}, want: []string{"OBJECTS", "configmap/default/app-config,secret/default/app-secret,secret/other/app-secret"}},
		{args: []string{"describe", "configmap", "app-config", "-n", "other"}, code: 1, want: []string{"not found"}},
	}
	for _, tc := range tests {
		out, code := runCLI(t, append(tc.args, "--status-socket", socket)...)
		if code != tc.code {
			t.Errorf("%v exited %d, want %d:\n%s", tc.args, code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(out, w) {
				t.Errorf("%v: output has %q:\n%s", tc.args, w, out)
			}
		}
		if showsSecret(out) {
			t.Errorf("%v: output shows a secret value:\n%s", tc.args, out)
		}
	}
}

// appManifest is a ConfigMap, and a pod that mounts it and takes a
// Secret's value into its env.
const appManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  app.conf: |
    level=debug
    port=80
---
apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  volumes:
  - name: config
    configMap: {name: app-config}
  containers:
  - name: app
    image: busybox:1.36
    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: app-secret, key: password}}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
`

// secretManifest is the Secret of appManifest, its password
// plantedValue.
const secretManifest = `apiVersion: v1
kind: Secret
metadata:
  name: app-secret
stringData:
  password: ` + plantedValue + `
  user: admin
`

// immutableSecret is secretManifest marked immutable.
var immutableSecret = strings.Replace(secretManifest, "kind: Secret\n", "kind: Secret\nimmutable: true\n", 1)

// otherValue is another secret value of plantedValue's size.
const otherValue = "another-secret-value"

func TestDiffObjects(t *testing.T) {
	running := map[string]string{"/m/app.yaml": appManifest, "/m/secret.yaml": secretManifest}
	tests := []struct {
		name      string
		running   map[string]string // the daemon's files, when not the default
		files     map[string]string // written under a temporary directory
		arg       string
		code      int
		want, not []string
	}{
		{name: "same objects", files: map[string]string{"app.yaml": appManifest, "secret.yaml": secretManifest}, arg: ".",
			want: []string{"configmap default/app-config: nothing", "secret default/app-secret: nothing", "pod default/app-n1: nothing"}},
		{name: "a ConfigMap's value changes", arg: "app.yaml", code: 1,
			files: map[string]string{"app.yaml": strings.Replace(appManifest, "level=debug", "level=info", 1)},
			want: []string{"configmap default/app-config: change", "key app.conf: value changed (19 bytes)",
				"pod default/app-n1: volume config: container app sees its files change in place, without a restart",
				"no pod is replaced for it", "-  level=debug", "+  level=info", "pod default/app-n1: nothing"}},
		{name: "a Secret's value changes", arg: "secret.yaml", code: 1,
			files: map[string]string{"secret.yaml": strings.Replace(secretManifest, plantedValue, otherValue, 1)},
			want: []string{"secret default/app-secret: change", "key password: value changed (20 bytes)",
				"pod default/app-n1: env of container app: takes the new values at its next restart, not before"},
			not: []string{"key user"}},
		{name: "a Secret's keys change", arg: "secret.yaml", code: 1,
			files: map[string]string{"secret.yaml": strings.Replace(secretManifest, "  user: admin", "  token: "+otherValue, 1)},
			want:  []string{"key user: removed", "key token: added (20 bytes)"}, not: []string{"key password"}},
		{name: "a Secret goes", arg: ".", code: 1,
			files: map[string]string{"app.yaml": appManifest, "secret.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-secret}\ndata: {k: v}\n"},
			want:  []string{"secret default/app-secret: remove", "keys removed with it: password, user", "configmap default/app-secret: add", "key k (1 bytes)", "+++ configmap/default/app-secret ("}},
		{name: "a Secret comes", arg: "new.yaml", code: 1,
			files: map[string]string{"new.yaml": strings.Replace(secretManifest, "app-secret", "new-secret", 1)},
			want:  []string{"secret default/new-secret: add", "key password (20 bytes), key user (5 bytes)", "no pod refers to it"}},
		{name: "an immutable Secret edited", arg: "secret.yaml", code: 2, running: map[string]string{"/m/secret.yaml": immutableSecret},
			files: map[string]string{"secret.yaml": strings.Replace(immutableSecret, plantedValue, otherValue, 1)},
			want:  []string{"key password: value changed (20 bytes)", "note: the running one is immutable", `secret.yaml: Secret "default/app-secret" is immutable`}},
		{name: "an immutable Secret's labels edited", arg: "secret.yaml", running: map[string]string{"/m/secret.yaml": immutableSecret},
			files: map[string]string{"secret.yaml": strings.Replace(immutableSecret, "metadata:\n", "metadata:\n  labels: {a: b}\n", 1)},
			want:  []string{"secret default/app-secret: nothing"}},
		{name: "a ConfigMap defined twice", arg: "x.yaml", code: 2,
			files: map[string]string{"x.yaml": strings.SplitAfter(appManifest, "---\n")[0]},
			want:  []string{`ConfigMap "default/app-config" is also defined in /m/app.yaml; this definition is ignored`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			daemonFiles := running
			if tc.running != nil {
				daemonFiles = tc.running
			}
			socket := objectsDaemon(t, daemonFiles)
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, code := runCLI(t, "diff", filepath.Join(dir, tc.arg), "--status-socket", socket)
			if code != tc.code {
				t.Errorf("diff exited %d, want %d; output:\n%s", code, tc.code, out)
			}
			checkOutput(t, out, tc.want, tc.not)
			if showsSecret(out) {
				t.Errorf("output shows a secret value:\n%s", out)
			}
		})
	}
}

// TestSecretValueNeverShown feeds a Secret holding plantedValue through
// every output on ConfigMaps and Secrets: the status API's answers, get
// in each format (kubectl's templates printing whole objects too), describe, diff of a changed, added, removed or invalid
// Secret, and validate of valid and invalid Secrets. It fails if any
// shows the value.
func TestSecretValueNeverShown(t *testing.T) {
	socket := objectsDaemon(t, map[string]string{"/m/app.yaml": appManifest, "/m/secret.yaml": secretManifest})
	var outputs []string
	for _, path := range []string{"/secrets", "/secrets?namespace=default", "/secrets/default/app-secret",
		"/secrets/default/app-secret?digestKey=00112233445566778899aabbccddeeff", "/configmaps", "/manifests"} {
		outputs = append(outputs, apiGet(t, socket, path))
	}
	var cmds [][]string
	for _, kind := range []string{"secrets", "secret", "configmaps"} {
		for _, o := range []string{"", "wide", "json", "yaml", "name", "jsonpath={@}", "jsonpath-as-json={@}", "go-template={{.}}", "custom-columns=ALL:{@}"} {
			cmds = append(cmds, []string{"get", kind, "-o", o}, []string{"get", kind, "app-secret", "-n", "default", "-o", o})
		}
	}
	cmds = append(cmds, []string{"describe", "secret", "app-secret"}, []string{"describe", "secret", "default/app-secret"}, []string{"get", "manifests"})
	dir := t.TempDir()
	invalid := []string{
		"type: kubernetes.io/tls\nstringData:\n  password: " + plantedValue + "\n",          // a required key missing
		"stringData:\n  password: [" + plantedValue + "]\n",                                 // not a string
		"stringData:\n  password: " + plantedValue + "\n  \"bad key\": x\n",                 // not a valid key
		"data:\n  password: " + plantedValue + "!!\n",                                       // not base64
		"stringData:\n  password: " + plantedValue + "\n  password: " + plantedValue + "\n", // defined twice
		"immutable: yes\nstringData:\n  password: " + plantedValue + "\n",                   // not a bool
	}
	files := map[string]string{
		"changed.yaml": strings.Replace(secretManifest, plantedValue, otherValue, 1),
		"same.yaml":    secretManifest,
		"added.yaml":   strings.Replace(secretManifest, "app-secret", "new-secret", 1),
		"twice.yaml":   secretManifest + "---\n" + secretManifest,
	}
	for i, body := range invalid {
		files[fmt.Sprintf("invalid%d.yaml", i)] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\n" + body
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, []string{"validate", path}, []string{"diff", path, "--as", "/m/secret.yaml"}, []string{"diff", path})
	}
	cmds = append(cmds, []string{"validate", dir}, []string{"diff", "--prune", filepath.Join(dir, "same.yaml")})
	for _, args := range cmds {
		if args[0] != "validate" {
			args = append(args, "--status-socket", socket)
		}
		out, _ := runCLI(t, args...)
		outputs = append(outputs, fmt.Sprintf("staticlet %s:\n%s", strings.Join(args, " "), out))
	}
	for _, out := range outputs {
		if showsSecret(out) {
			t.Errorf("the planted secret value shows in\n%s", out)
		}
	}
	// The outputs are what they should be, not empty answers.
	all := strings.Join(outputs, "\n")
	for _, want := range []string{"password=20", "password:  20 bytes", "key password: value changed (20 bytes)", "secret default/new-secret: add", "data[tls.crt]: Required value"} {
		if !strings.Contains(all, want) {
			t.Errorf("no output has %q", want)
		}
	}
}

// apiGet returns the body of GET path on the status socket.
func apiGet(t *testing.T, socket, path string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	resp, err := c.Get("http://staticlet" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	return fmt.Sprintf("GET %s:\n%s", path, body)
}

// showsSecret reports whether out holds plantedValue or otherValue, as
// they are or in base64 (as JSON and YAML encode a Secret's data).
func showsSecret(out string) bool {
	for _, v := range []string{plantedValue, otherValue} {
		if strings.Contains(out, v) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(v))) {
			return true
		}
	}
	return false
}
