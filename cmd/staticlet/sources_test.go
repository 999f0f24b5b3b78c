package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestSecretData(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "tls.crt"), "CERT")
	write(filepath.Join(creds, "app-key"), "KEY")
	write(filepath.Join(dir, "big"), strings.Repeat("x", maxSecretFile+1))

	tests := []struct {
		credDir string
		src     pod.DataSource
		want    string // the data, or a substring of the error after "!"
	}{
		{creds, pod.DataSource{Name: filepath.Join(dir, "tls.crt")}, "CERT"},
		{creds, pod.DataSource{Credential: true, Name: "app-key"}, "KEY"},
		{"", pod.DataSource{Credential: true, Name: "app-key"}, "!$CREDENTIALS_DIRECTORY is not set"},
		{creds, pod.DataSource{Credential: true, Name: "other"}, "!no such file"},
		{creds, pod.DataSource{Name: filepath.Join(dir, "big")}, "!is larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		got, err := secretData(tt.credDir)(tt.src)
		if want, isErr := strings.CutPrefix(tt.want, "!"); isErr {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: error %v, want one saying %q", tt.src, err, want)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%v: %q, %v; want %q", tt.src, got, err, tt.want)
		}
	}
}
