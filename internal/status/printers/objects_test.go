package printers

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/status"
)

var objectsStart = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func testConfigMap() v1.ConfigMap {
	return v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-config", CreationTimestamp: metav1.NewTime(objectsStart),
			Annotations: map[string]string{status.AnnotationObjectSource: "/m/app.yaml:1"}},
		Data:       map[string]string{"app.conf": "level=debug\nport=80\n"},
		BinaryData: map[string][]byte{"logo.png": {1, 2, 3}},
	}
}

// testSecret is a Secret as the status API serves it: without data.
func testSecret() v1.Secret {
	im := true
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-certs", CreationTimestamp: metav1.NewTime(objectsStart),
			Annotations: map[string]string{status.AnnotationObjectSource: "/m/etcd.yaml:20", status.AnnotationSecretKeys: "tls.crt=1151,tls.key=1704"}},
		Type:      v1.SecretTypeTLS,
		Immutable: &im,
	}
}

func TestObjectTables(t *testing.T) {
	now := objectsStart.Add(90 * time.Minute)
	tests := []struct {
		name  string
		print func(*bytes.Buffer) error
		want  []string // lines, spaces collapsed
	}{
		{name: "configmaps", print: func(b *bytes.Buffer) error { return ConfigMaps(b, []v1.ConfigMap{testConfigMap()}, false, now) },
			want: []string{"NAMESPACE NAME DATA AGE SOURCE", "default app-config 2 90m /m/app.yaml:1"}},
		{name: "configmaps wide", print: func(b *bytes.Buffer) error { return ConfigMaps(b, []v1.ConfigMap{testConfigMap()}, true, now) },
			want: []string{"NAMESPACE NAME DATA AGE SOURCE KEYS", "default app-config 2 90m /m/app.yaml:1 app.conf(20),logo.png(3)"}},
		{name: "no configmaps", print: func(b *bytes.Buffer) error { return ConfigMaps(b, nil, false, now) },
			want: []string{"NAMESPACE NAME DATA AGE SOURCE"}},
		{name: "secrets", print: func(b *bytes.Buffer) error { return Secrets(b, []v1.Secret{testSecret()}, false, now) },
			want: []string{"NAMESPACE NAME TYPE DATA AGE SOURCE", "kube-system etcd-certs kubernetes.io/tls 2 90m /m/etcd.yaml:20"}},
		{name: "secrets wide", print: func(b *bytes.Buffer) error { return Secrets(b, []v1.Secret{testSecret()}, true, now) },
			want: []string{"NAMESPACE NAME TYPE DATA AGE SOURCE KEYS", "kube-system etcd-certs kubernetes.io/tls 2 90m /m/etcd.yaml:20 tls.crt(1151),tls.key(1704)"}},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		if err := tc.print(&b); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

func TestDescribeObjects(t *testing.T) {
	tests := []struct {
		name      string
		describe  func(*bytes.Buffer) error
		want, not []string
	}{
		{name: "configmap", describe: func(b *bytes.Buffer) error { cm := testConfigMap(); return DescribeConfigMap(b, &cm) },
			want: []string{"Name:         app-config", "Namespace:    default", "staticlet.io/source: /m/app.yaml:1",
				"Data\n====\napp.conf:\n----\nlevel=debug\nport=80\n", "BinaryData\n====\nlogo.png: 3 bytes"}},
		{name: "secret", describe: func(b *bytes.Buffer) error { s := testSecret(); return DescribeSecret(b, &s) },
			want: []string{"Name:         etcd-certs", "Immutable:    true", "Type:  kubernetes.io/tls", "Data\n====\ntls.crt:  1151 bytes\ntls.key:  1704 bytes"},
			not:  []string{status.AnnotationSecretKeys}},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		if err := tc.describe(&b); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, b.String())
			}
		}
		for _, w := range tc.not {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: output has %q:\n%s", tc.name, w, b.String())
			}
		}
	}
}
