package cli

import (
	"bytes"
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
		for _, w := range append(tc.not, plantedValue) {
			if strings.Contains(out, w) {
				t.Errorf("%v: output has %q:\n%s", tc.args, w, out)
			}
		}
	}
}
