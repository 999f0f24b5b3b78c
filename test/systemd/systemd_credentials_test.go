package systemd

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

// credentialApp is a Secret whose key password is the systemd credential
// db-password, and a pod that reads it as $PASSWORD and in its volume
// creds. The pod shares the host's namespaces, as hostPod does.
const credentialApp = `apiVersion: v1
kind: Secret
metadata:
  name: db
  annotations: {staticlet.io/secret-credentials: password=db-password}
---
apiVersion: v1
kind: Pod
metadata:
  name: db
spec:
  hostNetwork: true
  hostIPC: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env: [{name: PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password}}}]
    volumeMounts: [{name: creds, mountPath: /etc/db}]
  volumes:
  - {name: creds, secret: {secretName: db}}
`

// TestSystemdCredential: under the packaged unit, with a drop-in that
// loads a credential (LoadCredential=, or LoadCredentialEncrypted= of one
// systemd-creds encrypted), a Secret whose annotation names that
// credential gives its value to a pod's container, and to its secret
// volume, a tmpfs under --root-dir; the value is on no disk under
// --root-dir and not in staticlet's journal. The manifest holds no value.
func TestSystemdCredential(t *testing.T) {
	requireMachineTools(t)
	const value = "planted-credential-9Hd3"
	tests := []struct {
		name    string
		unit    string
		files   map[string]string
		encrypt string // where to encrypt the value to, in the machine
	}{
		{
			name:  "LoadCredential",
			unit:  "LoadCredential=db-password:/etc/credstore/db-password",
			files: map[string]string{"/etc/credstore/db-password": value},
		},
		{
			name:    "LoadCredentialEncrypted",
			unit:    "LoadCredentialEncrypted=db-password:/etc/credstore.encrypted/db-password",
			encrypt: "/etc/credstore.encrypted/db-password",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := harness.NewEnv(t)
			m := bootStaticlet(t, e, staticletOptions{
				Unit:      tt.unit,
				Manifests: map[string]string{"db.yaml": credentialApp},
				Files:     tt.files,
			})
			if tt.encrypt != "" {
				// With the machine's host key (it has no TPM); staticlet,
				// which could not start without it, is started again.
				script := fmt.Sprintf("mkdir -p %s && printf %%s %s | systemd-creds encrypt --with-key=host --name=db-password - %s",
					filepath.Dir(tt.encrypt), value, tt.encrypt)
				if out, err := m.run("sh", "-c", script); err != nil {
					t.Fatalf("systemd-creds encrypt: %v\n%s", err, out)
				}
				if b, err := os.ReadFile(filepath.Join(m.root, tt.encrypt)); err != nil || strings.Contains(string(b), value) {
					t.Fatalf("the encrypted credential: %v, or it holds the value in plain text", err)
				}
				if out, err := m.run("sh", "-c", "systemctl reset-failed staticlet; systemctl restart staticlet"); err != nil {
					t.Fatalf("restarting staticlet: %v\n%s", err, out)
				}
			}
			checkCredential(t, e, m, value)
		})
	}
}

// checkCredential checks that pod db runs in m with the credential's
// value, which is in its secret volume and nowhere on disk.
func checkCredential(t *testing.T, e *harness.Env, m *staticletMachine, value string) {
	t.Helper()
	name := "db-" + harness.TestNode
	var p *v1.Pod
	harness.WaitFor(t, 90*time.Second, name+" running", func() (bool, string) {
		var err error
		p, err = m.findPod(name)
		if err != nil {
			return false, err.Error()
		}
		return harness.Running(p), harness.Describe(p)
	})
	_, pid := task(e, t, p.Status.ContainerStatuses[0])
	if env, err := harness.Environ(pid); err != nil || env["PASSWORD"] != value {
		t.Errorf("$PASSWORD in the container = %q (%v), want the credential's %q", env["PASSWORD"], err, value)
	}

	// The volume: in the machine, a tmpfs holding the value. (The
	// machine's mounts stay in its mount namespace, out of sight of the
	// host's containerd, so the container cannot see this one.)
	volume := filepath.Join(e.Root, "pods", string(p.UID), "volumes", "secret", "creds")
	if out, err := m.run("findmnt", "-n", "-o", "FSTYPE", volume); err != nil || strings.TrimSpace(out) != "tmpfs" {
		t.Errorf("findmnt %s in the machine = %q, %v; want tmpfs", volume, out, err)
	}
	if out, err := m.run("cat", filepath.Join(volume, "password")); err != nil || out != value {
		t.Errorf("the volume's password in the machine = %q, %v; want the credential's value", out, err)
	}

	for path, content := range harness.FilesOnDisk(t, e.Root) {
		if strings.Contains(content, value) {
			t.Errorf("the credential's value is on disk in %s", path)
		}
	}
	journal, _ := m.run("journalctl", "-u", "staticlet", "-o", "cat", "--no-pager")
	if strings.Contains(journal, value) {
		t.Errorf("the credential's value is in staticlet's journal")
	}
	if !strings.Contains(journal, "staticlet started") {
		t.Errorf("staticlet's journal lacks its start; is it read at all?\n%s", journal)
	}
	if out, _ := m.run("staticlet", "describe", "pod", name); strings.Contains(out, value) || !strings.Contains(out, name) {
		t.Errorf("staticlet describe pod %s inside, with the value or without the pod:\n%s", name, out)
	}
}
