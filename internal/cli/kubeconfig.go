package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/staticlet/staticlet/internal/kubeapi/pki"
)

// kubeconfigName names the kubeconfig's cluster, user and context.
const kubeconfigName = "staticlet"

func kubeconfigCommand() *cobra.Command {
	var rootDir, address, output, user string
	var view bool
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for the node's Kubernetes API (run --api-address), as its admin or a viewer",
		Long: `Print a kubeconfig for the Kubernetes API that staticlet serves when run with
--api-address: the API's address, its CA, and the admin client certificate
and key staticlet keeps under <root-dir>/api. Whoever holds it is the node's
admin; it is written 0600 with -o.

With --view, the kubeconfig is a viewer's instead, for a dashboard (k9s,
Headlamp) or a monitoring script: a new client certificate and key for
--user (default ` + pki.ViewerUser + `) in the group ` + pki.ViewerGroup + `, issued
by the node's CA for a year and kept nowhere. A viewer may read pods,
their logs, the node, namespaces, ConfigMaps, events, the node's Lease and
metrics, as Kubernetes' view role; not Secrets, exec, attach or
port-forward, and no writes. There is no revoking a certificate short of
replacing the CA (remove <root-dir>/api/ca.crt and ca.key and restart
staticlet: every kubeconfig must then be made again).

Both read <root-dir>/api, which only root can: run the command as root.`,
		Example: `  # kubectl against this node
  staticlet kubeconfig -o ~/.kube/staticlet.yaml
  KUBECONFIG=~/.kube/staticlet.yaml kubectl get pods -A

  # a read-only kubeconfig for a dashboard
  staticlet kubeconfig --view --user dashboard -o dashboard.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("user") && !view {
				return errors.New("--user names a viewer: give --view with it")
			}
			if view && user == "" {
				return errors.New("--user is empty: name the viewer")
			}
			who := ""
			if view {
				who = user
			}
			data, err := kubeconfig(filepath.Join(rootDir, "api"), address, who, time.Now())
			if err != nil {
				return err
			}
			if output == "" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			return pki.WriteFile(output, data)
		},
	}
	f := cmd.Flags()
	f.StringVar(&rootDir, "root-dir", DefaultRootDir, "staticlet's root directory, as given to run")
	f.StringVar(&address, "api-address", "", "the API's HOST:PORT (a bare PORT means 127.0.0.1); default: the address the running staticlet recorded in <root-dir>/api/address")
	f.StringVarP(&output, "output", "o", "", "write the kubeconfig to FILE (mode 0600) instead of standard output")
	f.BoolVar(&view, "view", false, "issue a new read-only client certificate, of the group "+pki.ViewerGroup+", instead of the admin's")
	f.StringVar(&user, "user", pki.ViewerUser, "with --view: the viewer's user name, the certificate's common name")
	return cmd
}

// kubeconfig is the kubeconfig for the API whose certificates are in dir,
// at address, or at the address recorded in dir where it is empty: the
// admin's, or, where viewer is not empty, one with a new certificate for
// the user viewer in the viewers' group.
func kubeconfig(dir, address, viewer string, now time.Time) ([]byte, error) {
	const first = "start staticlet with --api-address first"
	var client pki.Client
	var err error
	if viewer == "" {
		client, err = pki.ReadClient(dir)
	} else {
		client, err = pki.IssueClient(dir, viewer, []string{pki.ViewerGroup}, now)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no certificates for the Kubernetes API in %s (%w): %s", dir, err, first)
	case errors.Is(err, fs.ErrPermission) && viewer != "":
		return nil, fmt.Errorf("a viewer's certificate is signed with the CA key %s, which only root can read: run as root (%w)", filepath.Join(dir, pki.CAKeyFile), err)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("the admin's certificate and key are in %s, which only root can read: run as root (%w)", dir, err)
	case err != nil:
		return nil, err
	}
	if viewer == "" && !now.Before(client.NotAfter) {
		return nil, fmt.Errorf("the admin certificate in %s expired at %s: restart staticlet to have it issued again", dir, client.NotAfter.UTC().Format(time.RFC3339))
	}
	if address == "" {
		address, err = pki.ReadAddress(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no API address recorded in %s: %s, or give --api-address", filepath.Join(dir, pki.AddressFile), first)
		}
		if err != nil {
			return nil, err
		}
	}
	server, err := serverURL(address)
	if err != nil {
		return nil, err
	}
	// A viewer's user and context are named after it, so that kubeconfigs
	// merged keep the admin's and the viewers' apart.
	userName, contextName := kubeconfigName, kubeconfigName
	if viewer != "" {
		userName, contextName = viewer, viewer+"@"+kubeconfigName
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: client.CAPEM}
	cfg.AuthInfos[userName] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: kubeconfigName, AuthInfo: userName}
	cfg.CurrentContext = contextName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return data, nil
}

// serverURL is the URL a client reaches the API at, listening on
// address: a bare port is on 127.0.0.1, as run takes one, and so is a
// wildcard address, where the certificate covers loopback.
func serverURL(address string) (string, error) {
	if _, err := strconv.ParseUint(address, 10, 16); err == nil {
		address = ":" + address
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("the API address %q: %w", address, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("the API address %q: bad port %q", address, port)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, port), nil
}
