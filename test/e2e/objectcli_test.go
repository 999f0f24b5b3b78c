package e2e

import (
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// objectCLIValue is a Secret value that no command may show.
const objectCLIValue = "e2e-planted-value-7f3a"

const objectCLIManifest = `apiVersion: v1
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
  namespace: kube-system
stringData:
  password: ` + objectCLIValue + `
`

// TestObjectCommands runs the commands on ConfigMaps and Secrets against
// a running staticlet whose manifest directory holds a file of objects
// only: they are listed, described and completed, with their file, and no
// command shows the Secret's value.
func TestObjectCommands(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("objects.yaml", objectCLIManifest)
	harness.WaitFor(t, 30*time.Second, "the secret listed", func() (bool, string) {
		out, err := d.CLI("get", "secrets")
		return err == nil && strings.Contains(out, "app-secret"), out
	})
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "configmaps"}, []string{"default", "app-config", "1", "objects.yaml:1"}},
		{[]string{"get", "secrets", "-o", "wide"}, []string{"kube-system", "app-secret", "Opaque", "objects.yaml:", "password(22)"}},
		{[]string{"get", "secret", "app-secret", "-o", "yaml"}, []string{"kind: Secret", "staticlet.io/keys: password=22"}},
		{[]string{"get", "secrets", "-o", "json"}, []string{`"kind": "SecretList"`}},
		{[]string{"describe", "secret", "app-secret"}, []string{"Namespace:    kube-system", "password:  22 bytes"}},
		{[]string{"describe", "configmap", "app-config"}, []string{"level=debug"}},
		{[]string{"get", "manifests"}, []string{"OBJECTS", "configmap/default/app-config,secret/kube-system/app-secret"}},
		{[]string{"__complete", "describe", "secret", "--status-socket=" + d.Socket, "app-"}, []string{"app-secret"}},
	} {
		out := cliWants(t, d, tt.args, tt.want)
		if strings.Contains(out, objectCLIValue) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(objectCLIValue))) {
			t.Errorf("staticlet %s shows the secret value:\n%s", strings.Join(tt.args, " "), out)
		}
	}
}

// cliWants runs staticlet with args against d, or, when args start with
// __complete, as they are (the word completed is last, so they name the
// socket themselves); it fails t unless the command succeeds and its
// output holds each of want, and returns the output.
func cliWants(t *testing.T, d *harness.Daemon, args, want []string) string {
	t.Helper()
	var out string
	var err error
	if args[0] == "__complete" {
		var b []byte
		b, err = exec.Command(harness.Binary(t), args...).Output()
		out = string(b)
	} else {
		out, err = d.CLI(args...)
	}
	if err != nil {
		t.Errorf("staticlet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("staticlet %s lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	return out
}
