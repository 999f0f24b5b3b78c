package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/staticlet/staticlet/internal/kubeapi"
	"github.com/staticlet/staticlet/internal/kubeapi/pki"
)

// apiDir is where the Kubernetes API's certificates and address live,
// under --root-dir.
const apiDir = "api"

// kubeAPI is the Kubernetes API of --api-address, listening and with its
// certificates, ready to serve.
type kubeAPI struct {
	ln     net.Listener
	bundle *pki.Bundle
	hosts  []string
	server *kubeapi.Server
	logger *slog.Logger
}

// listenKubeAPI listens on --api-address and makes or loads the API's
// certificates under --root-dir, before anything runs, so that a taken
// port or a bad certificate fails the start; nil when the flag is unset.
func listenKubeAPI(cfg runConfig, apiCfg kubeapi.Config) (*kubeAPI, error) {
	if cfg.status.apiAddress == "" {
		return nil, nil
	}
	ln, err := listenTCP("api-address", cfg.status.apiAddress)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.rootDir, apiDir)
	hosts := servingHosts(ln.Addr())
	hostname, _ := os.Hostname()
	bundle, err := pki.Ensure(dir, pki.Options{Hostname: hostname, Hosts: hosts})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--api-address: %w", err)
	}
	if err := pki.WriteAddress(dir, ln.Addr().String()); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--api-address: %w", err)
	}
	for _, line := range bundle.Issued() {
		apiCfg.Logger.Info("Kubernetes API certificate: " + line)
	}
	return &kubeAPI{ln: ln, bundle: bundle, hosts: hosts, server: kubeapi.New(apiCfg), logger: apiCfg.Logger}, nil
}

// port is the port the API listens on, the node's kubeletEndpoint; 0
// when it is off (a nil a).
func (a *kubeAPI) port() int32 {
	if a == nil {
		return 0
	}
	if tcp, ok := a.ln.Addr().(*net.TCPAddr); ok {
		return int32(tcp.Port)
	}
	return 0
}

// Run serves the API until ctx ends, renewing the serving and admin
// certificates when they are due, without a restart.
func (a *kubeAPI) Run(ctx context.Context) error {
	a.logger.Info("serving the Kubernetes API", "address", a.ln.Addr().String(),
		"kubeconfig", "staticlet kubeconfig")
	go a.renew(ctx)
	return a.server.Serve(ctx, a.ln, a.bundle.ServerConfig())
}

// renew re-issues the certificates at their renewal time, until ctx ends.
func (a *kubeAPI) renew(ctx context.Context) {
	for {
		timer := time.NewTimer(time.Until(a.bundle.RenewAt()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if err := a.bundle.Refresh(a.hosts); err != nil {
			a.logger.Error("renewing the Kubernetes API's certificates", "err", err)
			// Try again in an hour rather than at once.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Hour):
			}
			continue
		}
		for _, line := range a.bundle.Issued() {
			a.logger.Info("Kubernetes API certificate: " + line)
		}
	}
}

// servingHosts are the names the serving certificate must hold beyond
// localhost and the hostname: the address listened on, or, for a
// wildcard, every address of the node's interfaces.
func servingHosts(addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	if !tcp.IP.IsUnspecified() {
		return []string{tcp.IP.String()}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var hosts []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (ipn.IP.IsGlobalUnicast() || ipn.IP.IsLoopback()) {
			hosts = append(hosts, ipn.IP.String())
		}
	}
	return hosts
}
