package pod

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podmanStyle is a file as `podman kube play` takes it: a ConfigMap, a
// Secret and the Pod that uses both.
const podmanStyle = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  LOG_LEVEL: debug
  app.conf: |
    listen 8080
binaryData:
  blob: AAEC
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: default
type: Opaque
data:
  password: czNjcjN0
stringData:
  user: admin
  password: overridden
---
apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  containers:
  - name: app
    image: busybox
    env:
    - name: LEVEL
      valueFrom:
        configMapKeyRef: {name: app-config, key: LOG_LEVEL}
    envFrom:
    - prefix: DB_
      secretRef: {name: app-secret}
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
  volumes:
  - name: cfg
    configMap: {name: app-config}
`

func TestDecodeFileObjects(t *testing.T) {
	m, err := DecodeFile("app.yaml", []byte(podmanStyle), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Pods) != 1 || len(m.Objects) != 2 {
		t.Fatalf("got %d pods and %d objects, want 1 and 2", len(m.Pods), len(m.Objects))
	}
	cm, sec := m.Objects[0], m.Objects[1]
	if cm.Key() != (ObjectKey{KindConfigMap, "default", "app-config"}) || sec.Key() != (ObjectKey{KindSecret, "default", "app-secret"}) {
		t.Errorf("keys = %v, %v", cm.Key(), sec.Key())
	}
	if cm.Source != "app.yaml" || cm.Line != 1 || sec.Line != 12 {
		t.Errorf("sources = %s:%d, %s:%d", cm.Source, cm.Line, sec.Source, sec.Line)
	}
	if got := cm.Keys(); !slices.Equal(got, []string{"LOG_LEVEL", "app.conf", "blob"}) {
		t.Errorf("ConfigMap keys = %v", got)
	}
	if v, _ := cm.Value("blob"); string(v) != "\x00\x01\x02" {
		t.Errorf("binaryData blob = %q", v)
	}
	// stringData wins over data, as in the apiserver.
	if v, _ := sec.Value("password"); string(v) != "overridden" {
		t.Errorf("password = %q, want stringData's", v)
	}
	if v, _ := sec.Value("user"); string(v) != "admin" || sec.Secret.StringData != nil || sec.Secret.Type != "Opaque" {
		t.Errorf("Secret not as stored: user %q, stringData %v, type %q", v, sec.Secret.StringData, sec.Secret.Type)
	}
	refs := m.Pods[0].ObjectRefs()
	want := []ObjectRef{{Kind: KindConfigMap, Name: "app-config"}, {Kind: KindSecret, Name: "app-secret"}}
	if !slices.Equal(refs, want) {
		t.Errorf("ObjectRefs = %+v, want %+v", refs, want)
	}
	// Decode still gives the pods alone; a file of objects alone is good.
	if pods, err := Decode("app.yaml", []byte(podmanStyle), testOpts); err != nil || len(pods) != 1 {
		t.Errorf("Decode = %d pods, %v", len(pods), err)
	}
	only := podmanStyle[:strings.Index(podmanStyle, "---\napiVersion: v1\nkind: Pod")]
	if m, err := DecodeFile("objects.yaml", []byte(only), testOpts); err != nil || len(m.Objects) != 2 || len(m.Pods) != 0 {
		t.Errorf("DecodeFile(objects alone) = %+v, %v", m, err)
	}
}

func TestObjectRefsOptional(t *testing.T) {
	p := decodeOne(t, podWith("  volumes:\n  - name: a\n    configMap: {name: shared, optional: true}\n  - name: p\n    projected:\n      sources:\n      - secret: {name: tls, optional: true}\n      - configMap: {name: extra, optional: true}\n",
		"    env:\n    - name: X\n      valueFrom:\n        configMapKeyRef: {name: shared, key: x}\n"), testOpts)
	got := p.ObjectRefs()
	want := []ObjectRef{{KindConfigMap, "extra", true}, {KindConfigMap, "shared", false}, {KindSecret, "tls", true}}
	if !slices.Equal(got, want) {
		t.Errorf("ObjectRefs = %+v, want %+v (optional only if every reference is)", got, want)
	}
}

func TestResolve(t *testing.T) {
	m, err := DecodeFile("app.yaml", []byte(podmanStyle), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Pods[0]
	byKey := map[ObjectKey]*Object{}
	for _, o := range m.Objects {
		byKey[o.Key()] = o
	}
	find := func(k ObjectKey) *Object { return byKey[k] }
	full := Resolve(p, find)
	if p.Objects != nil {
		t.Error("Resolve changed its argument")
	}
	if len(full.Objects) != 2 || full.Object(KindSecret, "app-secret") == nil || full.SandboxHash != p.SandboxHash {
		t.Fatalf("Resolve = %+v", full.Objects)
	}
	if again := Resolve(p, find); again.ObjectsHash != full.ObjectsHash {
		t.Error("ObjectsHash differs for the same objects")
	}
	missing := Resolve(p, func(k ObjectKey) *Object {
		if k.Kind == KindSecret {
			return nil
		}
		return byKey[k]
	})
	if missing.Object(KindSecret, "app-secret") != nil || missing.ObjectsHash == full.ObjectsHash {
		t.Error("a missing Secret left the hash as it was")
	}
	edited, err := DecodeFile("app.yaml", []byte(strings.Replace(podmanStyle, "LOG_LEVEL: debug", "LOG_LEVEL: info", 1)), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	byKey[edited.Objects[0].Key()] = edited.Objects[0]
	if Resolve(p, find).ObjectsHash == full.ObjectsHash {
		t.Error("an edited ConfigMap left the hash as it was")
	}
	if np := decodeOne(t, podWith("", ""), testOpts); Resolve(np, find).ObjectsHash != "" {
		t.Error("a pod that refers to nothing has an ObjectsHash")
	}
}

func TestValidateObjects(t *testing.T) {
	cm := func(body string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n" + body
	}
	sec := func(body string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n" + body
	}
	big := strings.Repeat("x", 600*1024)
	tests := []validateCase{
		{"ConfigMap name", "ValidateConfigMap: ObjectMeta", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
			[]string{"test.yaml:4: metadata.name: Invalid value: \"Bad_Name\""}},
		{"ConfigMap without a name", "ValidateObjectMeta", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n",
			[]string{"metadata.name: Required value"}},
		{"ConfigMap namespace", "ValidateObjectMeta", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: Kube_System\n",
			[]string{"metadata.namespace: Invalid value"}},
		{"ConfigMap key", "ValidateConfigMap: IsConfigMapKey", cm("data:\n  'a/b': x\n  good.key_1-x: z\n"),
			[]string{"test.yaml:6: data[a/b]: Invalid value: \"a/b\""}},
		{"ConfigMap key in both", "ValidateConfigMap", cm("data:\n  k: x\nbinaryData:\n  k: eA==\n"),
			[]string{"data[k]: Invalid value: \"k\": duplicate of key present in binaryData", "binaryData[k]: Invalid value: \"k\": duplicate of key present in data"}},
		{"ConfigMap too big", "ValidateConfigMap: MaxSecretSize", cm("data:\n  a: " + big + "\n  b: " + big + "\n"),
			[]string{"data: the values of data and binaryData hold 1228800 bytes together; a ConfigMap may hold at most 1048576"}},
		{"ConfigMap just fits", "ValidateConfigMap: MaxSecretSize", cm("data:\n  a: " + strings.Repeat("x", 1024*1024) + "\n"), nil},
		{"ConfigMap unknown field", "strict decoding", cm("dta:\n  a: b\n"), []string{"test.yaml:5: dta: unknown field"}},
		{"ConfigMap immutable", "", cm("immutable: true\ndata: {a: b}\n"), nil},
		{"ConfigMap own annotation", "staticlet's own", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    staticlet.io/secret-files: a=/x\n",
			[]string{"metadata.annotations[staticlet.io/secret-files]: unknown staticlet annotation on a ConfigMap"}},
		{"Secret key", "ValidateSecret: IsConfigMapKey", sec("stringData:\n  'bad key': x\n"), []string{"stringData[bad key]: Invalid value"}},
		{"Secret too big", "ValidateSecret: MaxSecretSize", sec("stringData:\n  a: " + big + "\n  b: " + big + "\n"),
			[]string{"data: the values hold 1228800 bytes together; a Secret may hold at most 1048576"}},
		{"Secret TLS", "ValidateSecret: SecretTypeTLS", sec("type: kubernetes.io/tls\nstringData:\n  tls.crt: x\n"),
			[]string{"data[tls.key]: Required value"}},
		{"Secret TLS complete", "ValidateSecret: SecretTypeTLS", sec("type: kubernetes.io/tls\nstringData:\n  tls.crt: x\n  tls.key: z\n"), nil},
		{"Secret basic auth", "ValidateSecret: SecretTypeBasicAuth", sec("type: kubernetes.io/basic-auth\n"),
			[]string{"data[username]: Required value", "data[password]: Required value"}},
		{"Secret ssh", "ValidateSecret: SecretTypeSSHAuth", sec("type: kubernetes.io/ssh-auth\n"), []string{"data[ssh-privatekey]: Required value"}},
		{"Secret service account token", "ValidateSecret: SecretTypeServiceAccountToken", sec("type: kubernetes.io/service-account-token\n"),
			[]string{"metadata.annotations[kubernetes.io/service-account.name]: Required value"}},
		{"Secret docker config", "ValidateSecret: SecretTypeDockerConfigJSON", sec("type: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: 'hunter2{'\n"),
			[]string{"data[.dockerconfigjson]: must be a JSON object (value not shown)"}},
		{"Secret custom type", "ValidateSecret: any other type", sec("type: example.com/thing\n"), nil},
		{"Secret bad base64", "strict decoding", sec("data:\n  a: '!!!not base64'\n"), []string{"test.yaml:6: data[a]: expected base64 text: illegal base64 data at input byte 0"}},
		{"Secret annotations", "staticlet's own", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  annotations:\n    staticlet.io/secret-files: 'tls.key=relative/path, bad key=/x, =/y, nokey'\n    staticlet.io/secret-credentials: 'a=../up'\n    staticlet.io/other: x\n",
			[]string{`staticlet.io/secret-files]: key tls.key: "relative/path" is not an absolute path`, `"bad key" is not a valid key`, `"=/y" is not key=source`, `"nokey" is not key=source`,
				`staticlet.io/secret-credentials]: key a: "../up" is not a credential name`, "staticlet.io/other]: unknown staticlet annotation"}},
		{"Secret filled and in data", "staticlet's own", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  annotations:\n    staticlet.io/secret-files: 'a=/x'\nstringData:\n  a: b\n",
			[]string{"key a is also in data or stringData"}},
		{"objects twice", "duplicates", cm("") + "---\n" + cm("data: {a: b}\n"),
			[]string{"test.yaml:9: metadata.name: ConfigMap default/c is defined twice in this file (first at line 4)"}},
		{"same name, two kinds", "", cm("") + "---\n" + sec(""), nil},
		{"kind in a List", "", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n",
			[]string{"items[0].kind: must be Pod, got \"ConfigMap\""}},
	}
	runValidateCases(t, tests)
}

// TestSecretValuesHidden checks that no message about a Secret quotes a
// value of it, whatever is wrong with it.
func TestSecretValuesHidden(t *testing.T) {
	const planted = "PLANTED-7f3a"
	docs := []string{
		"stringData:\n  a: 12345\n", // a number where a string goes
		"stringData:\n  a: {" + planted + ": 1}\n",
		"stringData:\n  a: [" + planted + "]\n",
		"stringData:\n  a: yes\n",
		"data:\n  a: " + planted + "\n",
		"type: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '" + planted + "'\n",
		"stringData:\n  a: 99999999999999999999999\n",
	}
	for _, body := range docs {
		doc := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n" + body
		_, err := DecodeFile("s.yaml", []byte(doc), testOpts)
		if err == nil {
			t.Errorf("DecodeFile(%q) succeeded, want an error", doc)
			continue
		}
		if strings.Contains(err.Error(), planted) || strings.Contains(err.Error(), "12345") || strings.Contains(err.Error(), "99999") {
			t.Errorf("error for %q quotes the value: %v", body, err)
		}
	}
}

func TestSecretFill(t *testing.T) {
	doc := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  annotations:\n    staticlet.io/secret-files: 'tls.crt=/etc/app/tls.crt'\n    staticlet.io/secret-credentials: 'tls.key=app-key'\ntype: kubernetes.io/tls\n"
	var asked []DataSource
	opts := testOpts
	opts.ReadData = func(s DataSource) ([]byte, error) {
		asked = append(asked, s)
		if s.Name == "gone" {
			return nil, errors.New("no such file")
		}
		return []byte("from " + s.String()), nil
	}
	m, err := DecodeFile("s.yaml", []byte(doc), opts)
	if err != nil {
		t.Fatal(err)
	}
	o := m.Objects[0]
	if v, _ := o.Value("tls.crt"); string(v) != "from /etc/app/tls.crt" {
		t.Errorf("tls.crt = %q", v)
	}
	if v, _ := o.Value("tls.key"); string(v) != "from credential app-key" {
		t.Errorf("tls.key = %q", v)
	}
	if len(asked) != 2 {
		t.Errorf("asked %v", asked)
	}
	// Without a reader (staticlet validate), the keys count as there.
	if _, err := DecodeFile("s.yaml", []byte(doc), testOpts); err != nil {
		t.Errorf("without ReadData: %v", err)
	}
	bad := strings.Replace(doc, "tls.key=app-key", "tls.key=gone", 1)
	if _, err := DecodeFile("s.yaml", []byte(bad), opts); err == nil || !strings.Contains(err.Error(), "s.yaml:7: metadata.annotations[staticlet.io/secret-credentials]: key tls.key: no such file") {
		t.Errorf("unreadable credential: %v", err)
	}
}

func TestObjectWatches(t *testing.T) {
	const doc = `apiVersion: v1
kind: Pod
metadata:
  name: app
  annotations:
    staticlet.io/restart-on-change: "ANN"
spec:
  initContainers:
  - {name: init, image: busybox, volumeMounts: [{name: certs, mountPath: /c}]}
  containers:
  - {name: app, image: busybox, volumeMounts: [{name: cfg, mountPath: /e}, {name: certs, mountPath: /c}]}
  - {name: side, image: busybox}
  volumes:
  - {name: cfg, configMap: {name: app-config}}
  - name: certs
    projected:
      sources:
      - secret: {name: tls}
      - configMap: {name: ca}
  - {name: host, hostPath: {path: /etc/app}}
`
	tls := &Object{Secret: &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tls"}}, Hash: "h1"}
	find := func(k ObjectKey) *Object {
		if k == tls.Key() {
			return tls
		}
		return nil
	}
	for _, tt := range []struct {
		ann  string
		want string
	}{
		{"true", `cfg [app] missing ConfigMap "default/app-config"; certs [init app] h1,missing Secret "default/tls", ConfigMap "default/ca"`},
		{"certs,host", `certs [init app] h1,missing Secret "default/tls", ConfigMap "default/ca"`},
		{"host", ``},
		{"false", ``},
	} {
		p := Resolve(decodeOne(t, strings.Replace(doc, "ANN", tt.ann, 1), testOpts), find)
		var got []string
		for _, w := range p.ObjectWatches() {
			got = append(got, fmt.Sprintf("%s %v %s %s", w.Volume, w.Containers, w.Digest, w.What))
		}
		if s := strings.Join(got, "; "); s != tt.want {
			t.Errorf("%s: ObjectWatches = %s\nwant %s", tt.ann, s, tt.want)
		}
	}
}
