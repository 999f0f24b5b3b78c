// Package registry is how staticlet reaches image registries: the
// credentials of docker config files (config.json and the legacy
// .dockercfg, with their credential helpers) and a containerd-style
// hosts.toml directory (mirrors, CA files, plain HTTP), put together as a
// containerd resolver for one pull.
//
// It reads its files again for every resolver it builds, so that a fixed
// credentials file takes effect at the next pull without a restart. It
// keeps no state between calls and is safe for concurrent use.
package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// helperTimeout bounds one run of a credential helper.
const helperTimeout = 30 * time.Second

// dockerHubKey is the key docker's tools file the default registry's
// credentials under.
const dockerHubKey = "https://index.docker.io/v1/"

// CredentialFiles lists the docker config files looked at for credentials,
// in order: file alone when it is given, else the kubelet's search path
// (config.json in rootDir, home/.docker and /.docker, then .dockercfg in
// rootDir, home and /). An empty home is skipped.
func CredentialFiles(file, rootDir, home string) []string {
	if file != "" {
		return []string{file}
	}
	var files []string
	for _, dir := range []string{rootDir, joinIf(home, ".docker"), "/.docker"} {
		if dir != "" {
			files = append(files, filepath.Join(dir, "config.json"))
		}
	}
	for _, dir := range []string{rootDir, home, "/"} {
		if dir != "" {
			files = append(files, filepath.Join(dir, ".dockercfg"))
		}
	}
	return files
}

func joinIf(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// Keyring is the credentials of one docker config file.
type Keyring struct {
	// File is where they were read from; empty when no file was found.
	File    string
	auths   []authEntry
	helpers map[string]string // credHelpers: registry host to helper name
	store   string            // credsStore: the helper for every other host
}

// authEntry is one registry's credentials from an auths section.
type authEntry struct {
	host           string // host[:port], possibly with * globs in its labels
	user, password string
	identityToken  string
}

// dockerAuth is an entry of auths (config.json) or of a .dockercfg.
type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
}

// dockerConfig is a config.json.
type dockerConfig struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredHelpers map[string]string     `json:"credHelpers"`
	CredsStore  string                `json:"credsStore"`
}

// LoadKeyring reads the first of files that exists. A file that exists but
// cannot be read or parsed is an error, not skipped: a typo in the file
// should say so rather than leave pulls anonymous. No file at all is an
// empty keyring.
func LoadKeyring(files []string) (*Keyring, error) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading registry credentials: %w", err)
		}
		k, err := parseKeyring(b, filepath.Base(f) == ".dockercfg")
		if err != nil {
			return nil, fmt.Errorf("reading registry credentials from %s: %w", f, err)
		}
		k.File = f
		return k, nil
	}
	return &Keyring{}, nil
}

// parseKeyring parses a config.json, or a .dockercfg when legacy is set
// (its top level is what config.json has under auths).
func parseKeyring(b []byte, legacy bool) (*Keyring, error) {
	var cfg dockerConfig
	if legacy {
		if err := json.Unmarshal(b, &cfg.Auths); err != nil {
			return nil, err
		}
	} else if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	k := &Keyring{helpers: map[string]string{}, store: cfg.CredsStore}
	for key, a := range cfg.Auths {
		e := authEntry{host: keyHost(key), user: a.Username, password: a.Password, identityToken: a.IdentityToken}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("auths %q: auth is not base64: %w", key, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("auths %q: auth is not user:password", key)
			}
			e.user, e.password = user, pass
		}
		k.auths = append(k.auths, e)
	}
	// Most specific first: an exact host wins over a glob.
	sort.Slice(k.auths, func(i, j int) bool {
		gi, gj := strings.Count(k.auths[i].host, "*"), strings.Count(k.auths[j].host, "*")
		if gi != gj {
			return gi < gj
		}
		return k.auths[i].host < k.auths[j].host
	})
	for key, helper := range cfg.CredHelpers {
		k.helpers[keyHost(key)] = helper
	}
	return k, nil
}

// keyHost reduces a key of auths ("https://host:port/v1/", "host") to
// host[:port]; docker's own key for its default registry becomes docker.io.
func keyHost(key string) string {
	if key == dockerHubKey || key == "index.docker.io" {
		return "docker.io"
	}
	if _, rest, ok := strings.Cut(key, "://"); ok {
		key = rest
	}
	host, _, _ := strings.Cut(key, "/")
	return strings.ToLower(host)
}

// canonicalHost maps the default registry's host names to the one key
// docker.io.
func canonicalHost(host string) string {
	host = strings.ToLower(host)
	switch host {
	case "registry-1.docker.io", "index.docker.io":
		return "docker.io"
	}
	return host
}

// Credentials returns the user name and secret for registry host
// (host[:port]), as containerd's authorizer wants them: an identity token
// is a secret with an empty user name. No credentials is two empty strings
// and no error.
func (k *Keyring) Credentials(ctx context.Context, host string) (string, string, error) {
	host = canonicalHost(host)
	if helper, ok := k.helpers[host]; ok {
		return runHelper(ctx, helper, host)
	}
	for _, e := range k.auths {
		if !hostMatches(e.host, host) {
			continue
		}
		if e.identityToken != "" {
			return "", e.identityToken, nil
		}
		if e.user != "" || e.password != "" {
			return e.user, e.password, nil
		}
	}
	if k.store != "" {
		return runHelper(ctx, k.store, host)
	}
	return "", "", nil
}

// hostMatches tells whether key (host[:port], labels possibly globs like
// *.example.com) matches host: the same port, the same number of labels,
// each matching, as the kubelet's keyring does.
func hostMatches(key, host string) bool {
	kh, kp := splitPort(key)
	hh, hp := splitPort(host)
	if kp != hp {
		return false
	}
	kl, hl := strings.Split(kh, "."), strings.Split(hh, ".")
	if len(kl) != len(hl) {
		return false
	}
	for i := range kl {
		if ok, err := path.Match(kl[i], hl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitPort(hostport string) (string, string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return hostport, ""
}

// helperOutput is what `docker-credential-NAME get` prints.
type helperOutput struct {
	Username string `json:"Username"`
	Secret   string `json:"Secret"`
}

// runHelper asks docker-credential-NAME for host's credentials, as docker
// does: the server on stdin, JSON on stdout. A helper that knows nothing of
// the host is no credentials, not an error.
func runHelper(ctx context.Context, name, host string) (string, string, error) {
	server := host
	if host == "docker.io" {
		server = dockerHubKey
	}
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker-credential-"+name, "get")
	cmd.Stdin = strings.NewReader(server)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stdout.String() + stderr.String())
		if strings.Contains(msg, "credentials not found") {
			return "", "", nil
		}
		return "", "", fmt.Errorf("running credential helper docker-credential-%s for %s: %w: %s", name, host, err, msg)
	}
	var out helperOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return "", "", fmt.Errorf("reading the answer of credential helper docker-credential-%s for %s: %w", name, host, err)
	}
	if out.Username == "<token>" {
		return "", out.Secret, nil
	}
	return out.Username, out.Secret, nil
}
