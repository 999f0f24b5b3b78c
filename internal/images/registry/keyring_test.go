package registry

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestCredentialFiles(t *testing.T) {
	tests := []struct {
		name, file, root, home string
		want                   []string
	}{
		{name: "explicit file only", file: "/etc/creds.json", root: "/var/lib/staticlet", home: "/root",
			want: []string{"/etc/creds.json"}},
		{name: "search path", root: "/var/lib/staticlet", home: "/root", want: []string{
			"/var/lib/staticlet/config.json", "/root/.docker/config.json", "/.docker/config.json",
			"/var/lib/staticlet/.dockercfg", "/root/.dockercfg", "/.dockercfg",
		}},
		{name: "no home", root: "/r", want: []string{"/r/config.json", "/.docker/config.json", "/r/.dockercfg", "/.dockercfg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CredentialFiles(tt.file, tt.root, tt.home); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("CredentialFiles(%q, %q, %q) = %q, want %q", tt.file, tt.root, tt.home, got, tt.want)
			}
		})
	}
}

func TestCredentials(t *testing.T) {
	config := `{"auths": {
		"https://registry.example.com/v1/": {"auth": "` + b64("alice:s3cret:with:colons") + `"},
		"127.0.0.1:5000": {"username": "bob", "password": "pw"},
		"*.corp.example": {"auth": "` + b64("glob:g") + `"},
		"exact.corp.example": {"auth": "` + b64("exact:e") + `"},
		"tokens.example": {"identitytoken": "tok"},
		"https://index.docker.io/v1/": {"auth": "` + b64("hub:h") + `"}
	}}`
	k, err := parseKeyring([]byte(config), false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host, user, secret string
	}{
		{host: "registry.example.com", user: "alice", secret: "s3cret:with:colons"},
		{host: "registry.example.com:443"},
		{host: "127.0.0.1:5000", user: "bob", secret: "pw"},
		{host: "127.0.0.1:5001"},
		{host: "127.0.0.1"},
		{host: "a.corp.example", user: "glob", secret: "g"},
		{host: "exact.corp.example", user: "exact", secret: "e"},
		{host: "a.b.corp.example"},
		{host: "tokens.example", secret: "tok"},
		{host: "registry-1.docker.io", user: "hub", secret: "h"},
		{host: "docker.io", user: "hub", secret: "h"},
		{host: "other.example"},
	}
	for _, tt := range tests {
		user, secret, err := k.Credentials(context.Background(), tt.host)
		if err != nil || user != tt.user || secret != tt.secret {
			t.Errorf("Credentials(%q) = %q, %q, %v, want %q, %q", tt.host, user, secret, err, tt.user, tt.secret)
		}
	}
}

func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	cfgJSON := filepath.Join(dir, "a", "config.json")
	dockercfg := filepath.Join(dir, "b", ".dockercfg")
	missing := filepath.Join(dir, "none", "config.json")
	writeFile(t, dockercfg, `{"old.example": {"auth": "`+b64("old:o")+`", "email": "x@example.com"}}`, 0o600)

	k, err := LoadKeyring([]string{missing, dockercfg})
	if err != nil {
		t.Fatal(err)
	}
	if k.File != dockercfg {
		t.Errorf("LoadKeyring read %q, want %q", k.File, dockercfg)
	}
	if u, s, _ := k.Credentials(context.Background(), "old.example"); u != "old" || s != "o" {
		t.Errorf(".dockercfg credentials = %q, %q, want old, o", u, s)
	}

	// The first file that exists wins, even over one later in the list.
	writeFile(t, cfgJSON, `{"auths": {"new.example": {"auth": "`+b64("new:n")+`"}}}`, 0o600)
	k, err = LoadKeyring([]string{missing, cfgJSON, dockercfg})
	if err != nil || k.File != cfgJSON {
		t.Fatalf("LoadKeyring = %v, %v, want %s read", k, err, cfgJSON)
	}
	if u, _, _ := k.Credentials(context.Background(), "old.example"); u != "" {
		t.Errorf("credentials of a file not read: %q", u)
	}

	k, err = LoadKeyring([]string{missing})
	if err != nil || k.File != "" {
		t.Errorf("LoadKeyring(no file) = %+v, %v, want an empty keyring", k, err)
	}

	for name, content := range map[string]string{
		"not json":        `{"auths": `,
		"bad base64":      `{"auths": {"x": {"auth": "%%%"}}}`,
		"no colon":        `{"auths": {"x": {"auth": "` + b64("nocolon") + `"}}}`,
		"auths not a map": `{"auths": []}`,
	} {
		writeFile(t, cfgJSON, content, 0o600)
		if _, err := LoadKeyring([]string{cfgJSON}); err == nil || !strings.Contains(err.Error(), cfgJSON) {
			t.Errorf("%s: LoadKeyring = %v, want an error naming the file", name, err)
		}
	}
}

// TestCredentialHelpers runs a helper script as docker would: the server on
// stdin, JSON back.
func TestCredentialHelpers(t *testing.T) {
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "docker-credential-fake"), `#!/bin/sh
read server
case "$server" in
helper.example) echo '{"ServerURL":"helper.example","Username":"hu","Secret":"hs"}' ;;
store.example) echo '{"ServerURL":"store.example","Username":"<token>","Secret":"refresh"}' ;;
https://index.docker.io/v1/) echo '{"Username":"hub","Secret":"h"}' ;;
broken.example) echo 'not json' ;;
failing.example) echo 'helper exploded' >&2; exit 3 ;;
*) echo 'credentials not found in native keychain'; exit 1 ;;
esac
`, 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	k, err := parseKeyring([]byte(`{
		"auths": {"plain.example": {"auth": "`+b64("p:p")+`"}, "store.example": {}},
		"credHelpers": {"helper.example": "fake", "failing.example": "fake", "broken.example": "fake"},
		"credsStore": "fake"
	}`), false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host, user, secret, err string
	}{
		{host: "helper.example", user: "hu", secret: "hs"},
		{host: "plain.example", user: "p", secret: "p"},
		{host: "store.example", secret: "refresh"},
		{host: "docker.io", user: "hub", secret: "h"},
		{host: "unknown.example"},
		{host: "failing.example", err: "helper exploded"},
		{host: "broken.example", err: "reading the answer"},
	}
	for _, tt := range tests {
		user, secret, err := k.Credentials(context.Background(), tt.host)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Credentials(%q) error = %v, want one containing %q", tt.host, err, tt.err)
			}
			continue
		}
		if err != nil || user != tt.user || secret != tt.secret {
			t.Errorf("Credentials(%q) = %q, %q, %v, want %q, %q", tt.host, user, secret, err, tt.user, tt.secret)
		}
	}
}
