package registry

import (
	"context"

	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
)

// Config says how to reach registries.
type Config struct {
	// CredentialFiles are the docker config files looked at for
	// credentials, the first that exists being used (see CredentialFiles).
	CredentialFiles []string
	// HostsDir is a directory in containerd's hosts.toml layout
	// (HostsDir/HOST[_PORT_]/hosts.toml, with CA files beside it); none
	// when empty.
	HostsDir string
}

// Hosts reads the credentials and returns where and how to reach each
// registry: the hosts.toml of its host if there is one (mirrors first,
// then the registry itself), else the registry over https, or over plain
// HTTP (after trying https) for a loopback registry. ctx bounds the
// credential helpers run for it.
func Hosts(ctx context.Context, cfg Config) (docker.RegistryHosts, error) {
	keyring, err := LoadKeyring(cfg.CredentialFiles)
	if err != nil {
		return nil, err
	}
	opts := config.HostOptions{
		Credentials: func(host string) (string, string, error) {
			return keyring.Credentials(ctx, host)
		},
	}
	if cfg.HostsDir != "" {
		opts.HostDir = config.HostDirFromRoot(cfg.HostsDir)
	}
	return config.ConfigureHosts(ctx, opts), nil
}

// NewResolver returns a resolver for one pull, with the credentials as the
// files say now. ctx bounds the credential helpers run for it.
func NewResolver(ctx context.Context, cfg Config) (remotes.Resolver, error) {
	hosts, err := Hosts(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return docker.NewResolver(docker.ResolverOptions{Hosts: hosts}), nil
}
