package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files WritePKI writes, named as kubeadm names them in
// /etc/kubernetes/pki/etcd: each certificate NAME.crt beside its key
// NAME.key.
const (
	// CA signs the others, and is the trusted CA for clients and peers.
	CA = "ca"
	// Server is the serving certificate of the client URLs.
	Server = "server"
	// Peer is the certificate of the peer URLs, serving and client.
	Peer = "peer"
	// HealthcheckClient is the client certificate kubeadm gives its
	// health checks; tests use it as their client.
	HealthcheckClient = "healthcheck-client"
)

// validity is how long the certificates are valid, from an hour before
// they are made (clocks may differ a little).
const validity = 24 * time.Hour

// WritePKI writes a CA and the certificates kubeadm makes for a local
// etcd, signed by it, into dir (created if missing): Server and Peer for
// localhost, 127.0.0.1 and ::1, usable to serve and as clients, and
// HealthcheckClient, a client certificate. Keys are ECDSA P-256, as
// kubeadm's ECDSA-P256 encryption algorithm makes them, in PKCS #8.
func WritePKI(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "etcd-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	ca, caKey, err := writeCert(dir, CA, caTmpl, nil, nil, now)
	if err != nil {
		return err
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	leaves := []struct {
		name, commonName string
		usage            []x509.ExtKeyUsage
		serves           bool // for localhost, 127.0.0.1 and ::1
	}{
		{Server, "etcd-server", both, true},
		{Peer, "etcd-peer", both, true},
		{HealthcheckClient, "kube-etcd-healthcheck-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
	}
	for _, l := range leaves {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: l.commonName},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: l.usage,
		}
		if l.serves {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		if _, _, err := writeCert(dir, l.name, tmpl, ca, caKey, now); err != nil {
			return err
		}
	}
	return nil
}

// writeCert makes a key and a certificate from tmpl, signed by parent's
// key (self-signed when parent is nil), and writes them as NAME.crt and
// NAME.key in dir.
func writeCert(dir, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key %s: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("generating serial of %s: %w", name, err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(validity)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key %s: %w", name, err)
	}
	err = errors.Join(
		os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644),
		os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("writing %s: %w", name, err)
	}
	return cert, key, nil
}
