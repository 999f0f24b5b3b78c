package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// The viewer client certificates' group and default user: the API lets
// ViewerGroup read what Kubernetes' built-in view role lets a user read
// (pods, their logs, ConfigMaps, events; never Secrets, exec, attach or
// port forwarding), and the node, namespaces, the node's Lease and
// metrics besides.
const (
	ViewerUser  = "staticlet-viewer"
	ViewerGroup = "staticlet:viewers"
)

// CAKeyFile is the CA's key in the directory, which IssueClient reads.
const CAKeyFile = caKeyFile

// IssueClient issues a client certificate for user, of the groups
// groups, signed by the CA in dir, valid from now for a year (cut short
// where the CA ends first), and returns it with the CA as a kubeconfig
// needs them. Nothing is written: each call issues a new key and
// certificate, independent of the others, which no one can revoke short
// of replacing the CA. Reading the CA's key needs the access of the user
// who runs staticlet (root); a missing CA gives an error that wraps
// fs.ErrNotExist.
func IssueClient(dir, user string, groups []string, now time.Time) (Client, error) {
	if user == "" {
		return Client{}, errors.New("issuing a client certificate: the user name is empty")
	}
	ca, err := readPair(dir, caCertFile, caKeyFile)
	if err != nil {
		return Client{}, fmt.Errorf("issuing a client certificate for %q: %w", user, err)
	}
	certPath := filepath.Join(dir, caCertFile)
	switch {
	case !ca.cert.IsCA:
		return Client{}, fmt.Errorf("issuing a client certificate for %q: %s is not a CA certificate", user, certPath)
	case !now.Before(ca.cert.NotAfter):
		return Client{}, fmt.Errorf("issuing a client certificate for %q: the CA in %s expired at %s: restart staticlet to have a new one made",
			user, certPath, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	leaf, err := newLeaf(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now)
	if err != nil {
		return Client{}, err
	}
	return Client{CAPEM: ca.certPEM, CertPEM: leaf.certPEM, KeyPEM: leaf.keyPEM, NotAfter: leaf.cert.NotAfter}, nil
}
