package status

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// plantedValue is a Secret value that no output may show.
const plantedValue = "planted-s3cr3t-value"

// objectsManifest defines a ConfigMap and Secrets in two namespaces.
const objectsManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  app.conf: "level=debug\n"
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"stringData":{"password":"` + plantedValue + `"}}'
stringData:
  password: ` + plantedValue + `
  user: admin
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: other
type: kubernetes.io/tls
data:
  tls.crt: Y2VydA==
  tls.key: a2V5
`

// testObjects decodes objectsManifest as read from /m/app.yaml.
func testObjects(t *testing.T) []*pod.Object {
	t.Helper()
	m, err := pod.DecodeFile("/m/app.yaml", []byte(objectsManifest), pod.Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return m.Objects
}

func TestAPISecret(t *testing.T) {
	objs := testObjects(t)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sec := APISecret(objs[1], since)
	if sec.Data != nil || sec.StringData != nil {
		t.Errorf("APISecret() has data: %v %v", sec.Data, sec.StringData)
	}
	want := map[string]string{
		AnnotationObjectSource: "/m/app.yaml:" + strconv.Itoa(objs[1].Line),
		AnnotationSecretKeys:   "password=20,user=5",
	}
	for k, v := range want {
		if sec.Annotations[k] != v {
			t.Errorf("APISecret() annotation %s = %q, want %q", k, sec.Annotations[k], v)
		}
	}
	if _, ok := sec.Annotations[lastApplied]; ok {
		t.Errorf("APISecret() keeps %s", lastApplied)
	}
	if sec.Kind != "Secret" || sec.APIVersion != "v1" || sec.Type != v1.SecretTypeOpaque || !sec.CreationTimestamp.Time.Equal(since) {
		t.Errorf("APISecret() = %s %s type %q created %v", sec.APIVersion, sec.Kind, sec.Type, sec.CreationTimestamp)
	}
	if objs[1].Secret.Annotations[AnnotationSecretKeys] != "" {
		t.Error("APISecret() changed the object it was given")
	}
	cm := APIConfigMap(objs[0], since)
	if cm.Data["app.conf"] != "level=debug\n" || cm.Annotations[AnnotationObjectSource] != "/m/app.yaml:1" || cm.Kind != "ConfigMap" {
		t.Errorf("APIConfigMap() = %+v", cm)
	}
}

func TestKeySizes(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]int
		wantErr bool
	}{
		{in: "", want: map[string]int{}},
		{in: "a=1", want: map[string]int{"a": 1}},
		{in: "tls.crt=1151,tls.key=0", want: map[string]int{"tls.crt": 1151, "tls.key": 0}},
		{in: "a", wantErr: true},
		{in: "a=x", wantErr: true},
	}
	for _, tc := range tests {
		got, err := KeySizes(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("KeySizes(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("KeySizes(%q) = %v, want %v", tc.in, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("KeySizes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

func TestStoreObjects(t *testing.T) {
	store := NewStore()
	objs := testObjects(t)
	store.SetObjects(objs)
	first := store.ConfigMap("default", "app-config").CreationTimestamp
	store.SetObjects(objs[:2]) // the tls Secret goes
	if got := store.ConfigMap("default", "app-config").CreationTimestamp; !got.Equal(&first) {
		t.Errorf("creationTimestamp %v after a new set, want %v kept", got, first)
	}
	tests := []struct {
		kind, ns string
		want     []string
	}{
		{kind: pod.KindConfigMap, want: []string{"default/app-config"}},
		{kind: pod.KindSecret, want: []string{"default/app-secret"}},
		{kind: pod.KindSecret, ns: "other"},
		{kind: pod.KindConfigMap, ns: "default", want: []string{"default/app-config"}},
	}
	for _, tc := range tests {
		var got []string
		if tc.kind == pod.KindSecret {
			for _, s := range store.Secrets(tc.ns) {
				got = append(got, s.Namespace+"/"+s.Name)
			}
		} else {
			for _, c := range store.ConfigMaps(tc.ns) {
				got = append(got, c.Namespace+"/"+c.Name)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s in %q = %v, want %v", tc.kind, tc.ns, got, tc.want)
		}
	}
	if store.Secret("other", "app-secret", nil) != nil {
		t.Error("Secret(other/app-secret) found after it went")
	}
}

func TestServerObjects(t *testing.T) {
	store := NewStore()
	store.SetObjects(testObjects(t))
	c := startServer(t, ServerConfig{Store: store})
	ctx := context.Background()

	cms, err := c.ConfigMaps(ctx, "")
	if err != nil || len(cms.Items) != 1 || cms.Kind != "ConfigMapList" || cms.Items[0].Data["app.conf"] == "" {
		t.Errorf("ConfigMaps() = %+v, %v; want the one ConfigMap with its data", cms, err)
	}
	secs, err := c.Secrets(ctx, "other")
	if err != nil || len(secs.Items) != 1 || secs.Kind != "SecretList" || secs.Items[0].Type != v1.SecretTypeTLS {
		t.Errorf("Secrets(other) = %+v, %v; want the tls Secret", secs, err)
	}
	sec, err := c.Secret(ctx, "default", "app-secret", nil)
	if err != nil || sec.Annotations[AnnotationSecretKeys] != "password=20,user=5" || sec.Annotations[AnnotationSecretDigests] != "" {
		t.Errorf("Secret() = %+v, %v", sec, err)
	}
	key := []byte("0123456789abcdef")
	sec, err = c.Secret(ctx, "default", "app-secret", key)
	if err != nil {
		t.Fatalf("Secret() with a digest key: %v", err)
	}
	want := SecretDigests(testObjects(t)[1], key)
	if !strings.Contains(sec.Annotations[AnnotationSecretDigests], want["password"]) {
		t.Errorf("Secret() digests = %s, want password's %s", sec.Annotations[AnnotationSecretDigests], want["password"])
	}
	if _, err := c.Secret(ctx, "default", "nothing", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Secret(nothing) error = %v, want ErrNotFound", err)
	}
	if _, err := c.ConfigMap(ctx, "other", "app-config"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ConfigMap(other/app-config) error = %v, want ErrNotFound", err)
	}
	if _, err := c.Secret(ctx, "default", "app-secret", []byte("short")); err == nil {
		t.Error("Secret() with a 5-byte digest key: no error")
	}
}

// TestServerNeverServesSecretValues reads every endpoint that serves
// objects and fails if the planted Secret value appears in any answer.
func TestServerNeverServesSecretValues(t *testing.T) {
	store := NewStore()
	store.SetObjects(testObjects(t))
	h := NewServer(ServerConfig{Store: store}).Handler()
	for _, path := range []string{
		"/secrets", "/secrets?namespace=default", "/secrets/default/app-secret",
		"/secrets/default/app-secret?digestKey=00112233445566778899aabbccddeeff",
		"/configmaps", "/configmaps/default/app-config",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, body)
		}
		if strings.Contains(string(body), plantedValue) || strings.Contains(string(body), base64.StdEncoding.EncodeToString([]byte(plantedValue))) {
			t.Errorf("GET %s shows the planted secret value:\n%s", path, body)
		}
	}
}
