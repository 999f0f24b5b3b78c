package spec

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
)

// objectsYAML are the ConfigMap and Secret the pods of these tests refer
// to. The Secret's values (s3cret, admin) must never show in an error.
const objectsYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: app}
data: {LEVEL: debug, a.conf: "A", "2nd": two}
binaryData: {bin: AAEC}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {user: admin}
data: {pass: czNjcmV0}
---
`

// resolvedPod decodes pod web, with one container c whose fields (indented
// by four spaces) are container and volumes the lines of spec.volumes
// (indented by two), with the objects of objectsYAML beside it, and
// resolves its references to them, as the desired set does.
func resolvedPod(t *testing.T, container, volumes string) *pod.Pod {
	t.Helper()
	if volumes != "" {
		volumes = "  volumes:\n" + volumes
	}
	podYAML := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n" + volumes +
		"  containers:\n  - name: c\n    image: busybox\n" + container
	m, err := pod.DecodeFile("t.yaml", []byte(objectsYAML+podYAML), pod.Options{NodeName: "n"})
	if err != nil {
		t.Fatalf("pod.DecodeFile:\n%s\nerror: %v", podYAML, err)
	}
	if len(m.Pods) != 1 {
		t.Fatalf("pod.DecodeFile: got %d pods, want 1", len(m.Pods))
	}
	return pod.Resolve(m.Pods[0], func(k pod.ObjectKey) *pod.Object {
		for _, o := range m.Objects {
			if o.Key() == k {
				return o
			}
		}
		return nil
	})
}

// checkConfigError checks that err is a CreateContainerConfigError with
// the message want, and quotes no value of the Secret.
func checkConfigError(t *testing.T, err error, want string) {
	t.Helper()
	var we *pod.WaitingError
	if !errors.As(err, &we) || we.Reason != "CreateContainerConfigError" {
		t.Fatalf("error = %v (%T), want a CreateContainerConfigError WaitingError", err, err)
	}
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	for _, v := range []string{"s3cret", "admin"} {
		if strings.Contains(err.Error(), v) {
			t.Errorf("error %q shows a value of the Secret", err)
		}
	}
}

func TestVolumeFiles(t *testing.T) {
	type file struct {
		data string
		mode fs.FileMode
	}
	tests := []struct {
		name    string
		volume  string // one entry of spec.volumes, named v
		want    map[string]file
		wantErr string
		tmpfs   bool
	}{
		{
			name:   "configMap: every key, binaryData too, 0644",
			volume: `{name: v, configMap: {name: app}}`,
			want:   map[string]file{"LEVEL": {"debug", 0o644}, "a.conf": {"A", 0o644}, "2nd": {"two", 0o644}, "bin": {"\x00\x01\x02", 0o644}},
		},
		{
			name:   "configMap items: paths, item mode over defaultMode",
			volume: `{name: v, configMap: {name: app, defaultMode: 0600, items: [{key: a.conf, path: conf/app.conf, mode: 0400}, {key: LEVEL, path: ./level}]}}`,
			want:   map[string]file{"conf/app.conf": {"A", 0o400}, "level": {"debug", 0o600}},
		},
		{
			name:    "configMap missing",
			volume:  `{name: v, configMap: {name: nope}}`,
			wantErr: `configmap "nope" not found`,
		},
		{
			name:   "configMap missing, optional: empty",
			volume: `{name: v, configMap: {name: nope, optional: true}}`,
			want:   map[string]file{},
		},
		{
			name:    "configMap item of a missing key",
			volume:  `{name: v, configMap: {name: app, items: [{key: LEVEL, path: l}, {key: zz, path: z}]}}`,
			wantErr: "configmap references non-existent config key: zz",
		},
		{
			name:   "configMap item of a missing key, optional: skipped",
			volume: `{name: v, configMap: {name: app, optional: true, items: [{key: LEVEL, path: l}, {key: zz, path: z}]}}`,
			want:   map[string]file{"l": {"debug", 0o644}},
		},
		{
			name:   "secret: every key, stringData folded in",
			volume: `{name: v, secret: {secretName: creds}}`,
			want:   map[string]file{"pass": {"s3cret", 0o644}, "user": {"admin", 0o644}},
			tmpfs:  true,
		},
		{
			name:   "secret items and defaultMode",
			volume: `{name: v, secret: {secretName: creds, defaultMode: 0400, items: [{key: pass, path: db/password}]}}`,
			want:   map[string]file{"db/password": {"s3cret", 0o400}},
			tmpfs:  true,
		},
		{
			name:    "secret missing",
			volume:  `{name: v, secret: {secretName: nope}}`,
			wantErr: `secret "nope" not found`,
		},
		{
			name:    "secret item of a missing key",
			volume:  `{name: v, secret: {secretName: creds, items: [{key: token, path: t}]}}`,
			wantErr: "references non-existent secret key: token",
		},
		{
			name: "projected: sources merged, the volume's defaultMode",
			volume: `{name: v, projected: {defaultMode: 0440, sources: [
			  {configMap: {name: app, items: [{key: a.conf, path: cm/a.conf}]}},
			  {secret: {name: creds, items: [{key: pass, path: pass, mode: 0400}]}},
			  {downwardAPI: {items: [{path: ns, fieldRef: {fieldPath: metadata.namespace}}]}}]}}`,
			want:  map[string]file{"cm/a.conf": {"A", 0o440}, "pass": {"s3cret", 0o400}, "ns": {"default", 0o440}},
			tmpfs: true,
		},
		{
			name: "projected: an optional source missing",
			volume: `{name: v, projected: {sources: [
			  {configMap: {name: app, items: [{key: LEVEL, path: level}]}},
			  {secret: {name: nope, optional: true}}]}}`,
			want:  map[string]file{"level": {"debug", 0o644}},
			tmpfs: true,
		},
		{
			name: "projected: a source missing",
			volume: `{name: v, projected: {sources: [
			  {secret: {name: creds}},
			  {configMap: {name: nope}}]}}`,
			wantErr: `configmap "nope" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := resolvedPod(t, "", "  - "+tt.volume+"\n")
			v := &p.Spec.Volumes[0]
			files, ok, err := VolumeFiles(p, v, NodeFacts{})
			if !ok {
				t.Fatalf("VolumeFiles(%s): not a volume whose files it makes", tt.volume)
			}
			if tt.wantErr != "" {
				checkConfigError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("VolumeFiles: %v", err)
			}
			if got := VolumeOnTmpfs(v); got != tt.tmpfs {
				t.Errorf("VolumeOnTmpfs = %v, want %v", got, tt.tmpfs)
			}
			if len(files) != len(tt.want) {
				t.Errorf("VolumeFiles gave %v, want %d files", keys(files), len(tt.want))
			}
			for path, w := range tt.want {
				got, ok := files[path]
				if !ok {
					t.Errorf("VolumeFiles has no %q; has %v", path, keys(files))
					continue
				}
				if string(got.Data) != w.data || got.Mode != w.mode {
					t.Errorf("VolumeFiles[%q] = %q %v, want %q %v", path, got.Data, got.Mode, w.data, w.mode)
				}
			}
		})
	}
	// Other types are not its business.
	p := resolvedPod(t, "", "  - {name: d, emptyDir: {}}\n")
	if _, ok, _ := VolumeFiles(p, &p.Spec.Volumes[0], NodeFacts{}); ok {
		t.Error("VolumeFiles claims an emptyDir")
	}
}

func TestObjectVolumesReadOnly(t *testing.T) {
	p := resolvedPod(t, `    volumeMounts:
    - {name: cm, mountPath: /cm}
    - {name: s, mountPath: /s, readOnly: false}
    - {name: pr, mountPath: /pr}
`, `  - {name: cm, configMap: {name: app}}
  - {name: s, secret: {secretName: creds}}
  - {name: pr, projected: {sources: [{secret: {name: creds}}]}}
`)
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: map[string]string{"cm": "/p/cm", "s": "/p/s", "pr": "/p/pr"}})
	for _, dest := range []string{"/cm", "/s", "/pr"} {
		if m := mountAt(t, s.Mounts, dest); !slices.Contains(m.Options, "ro") {
			t.Errorf("mount at %s options = %q, want ro", dest, m.Options)
		}
	}
}

func TestResolveEnvObjects(t *testing.T) {
	tests := []struct {
		name    string
		env     string // the container's env and envFrom lines, indented by four
		want    []string
		wantErr string
	}{
		{
			name: "key references",
			env: `    env:
    - {name: LEVEL, valueFrom: {configMapKeyRef: {name: app, key: LEVEL}}}
    - {name: PASS, valueFrom: {secretKeyRef: {name: creds, key: pass}}}
    - {name: BOTH, value: "$(LEVEL)/$(PASS)"}
`,
			want: []string{"LEVEL=debug", "PASS=s3cret", "BOTH=debug/s3cret"},
		},
		{
			name:    "missing ConfigMap",
			env:     "    env:\n    - {name: X, valueFrom: {configMapKeyRef: {name: nope, key: LEVEL}}}\n",
			wantErr: `configmap "nope" not found`,
		},
		{
			name:    "missing Secret",
			env:     "    env:\n    - {name: X, valueFrom: {secretKeyRef: {name: nope, key: pass}}}\n",
			wantErr: `secret "nope" not found`,
		},
		{
			name:    "missing ConfigMap key",
			env:     "    env:\n    - {name: X, valueFrom: {configMapKeyRef: {name: app, key: zz}}}\n",
			wantErr: "couldn't find key zz in ConfigMap default/app",
		},
		{
			name:    "a binaryData key is not a variable's",
			env:     "    env:\n    - {name: X, valueFrom: {configMapKeyRef: {name: app, key: bin}}}\n",
			wantErr: "couldn't find key bin in ConfigMap default/app",
		},
		{
			name:    "missing Secret key",
			env:     "    env:\n    - {name: X, valueFrom: {secretKeyRef: {name: creds, key: token}}}\n",
			wantErr: "couldn't find key token in Secret default/creds",
		},
		{
			name: "optional references to what is missing: left out",
			env: `    env:
    - {name: A, valueFrom: {configMapKeyRef: {name: nope, key: LEVEL, optional: true}}}
    - {name: B, valueFrom: {secretKeyRef: {name: creds, key: token, optional: true}}}
    - {name: C, value: c}
`,
			want: []string{"C=c"},
		},
		{
			name: "envFrom: prefixes, every data key, env after and over it",
			env: `    envFrom:
    - {prefix: CFG_, configMapRef: {name: app}}
    - secretRef: {name: creds}
    env:
    - {name: CFG_LEVEL, value: "$(CFG_LEVEL)-and-info"}
    - {name: URL, value: "db://$(user):$(pass)@h"}
`,
			want: []string{"CFG_2nd=two", "CFG_LEVEL=debug-and-info", "CFG_a.conf=A", "pass=s3cret", "user=admin", "URL=db://admin:s3cret@h"},
		},
		{
			name: "envFrom: a later source overrides an earlier one",
			env: `    envFrom:
    - {prefix: us, secretRef: {name: creds}}
    - configMapRef: {name: app}
    - {prefix: L, configMapRef: {name: app}}
`,
			want: []string{"uspass=s3cret", "ususer=admin", "2nd=two", "LEVEL=debug", "a.conf=A", "L2nd=two", "LLEVEL=debug", "La.conf=A"},
		},
		{
			name: "envFrom: an optional source missing",
			env: `    envFrom:
    - configMapRef: {name: nope, optional: true}
    - secretRef: {name: nope, optional: true}
    env: [{name: C, value: c}]
`,
			want: []string{"C=c"},
		},
		{
			name:    "envFrom: a source missing",
			env:     "    envFrom:\n    - secretRef: {name: nope}\n",
			wantErr: `secret "nope" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := resolvedPod(t, tt.env, "")
			vars, _, err := resolveEnv(p, &p.Spec.Containers[0], NodeFacts{})
			if tt.wantErr != "" {
				checkConfigError(t, err, tt.wantErr)
				// The container's spec carries the kubelet's message as it is.
				_, err = Container(p, &p.Spec.Containers[0], ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}})
				checkConfigError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("resolveEnv: %v", err)
			}
			var got []string
			for _, v := range vars {
				got = append(got, v.Name+"="+v.Value)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("resolveEnv = %q, want %q", got, tt.want)
			}
		})
	}
}
