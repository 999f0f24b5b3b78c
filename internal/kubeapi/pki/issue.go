package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// The certificates' lives: the CA's as k3s and kubeadm give theirs, the
// leaves' as the kubelet and kubeadm give client and serving certificates.
const (
	caLife   = 10 * 365 * 24 * time.Hour
	leafLife = 365 * 24 * time.Hour
	// backdate starts a certificate's validity a little before it is
	// made, so that a client whose clock is behind accepts it.
	backdate = 5 * time.Minute
)

// The admin client certificate's subject, as kubeadm's admin.conf has: a
// member of system:masters, the group every authorizer lets do anything.
const (
	AdminUser  = "staticlet-admin"
	AdminGroup = "system:masters"
)

// servingName is the serving certificate's common name.
const servingName = "staticlet"

// keyPair is a certificate, its key and both as PEM.
type keyPair struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// renewAt is when a certificate is due: a third of its life before it
// ends.
func renewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-life / 3)
}

// names are the DNS names and IP addresses a serving certificate covers.
type names struct {
	dns []string
	ips []net.IP
}

// servingNames are the names the serving certificate must cover:
// localhost, the loopback addresses, the hostname and hosts (DNS names or
// IP addresses; wildcard addresses and empty strings are skipped).
func servingNames(hostname string, hosts []string) names {
	n := names{dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}}
	for _, h := range append([]string{hostname}, hosts...) {
		h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(h), "["), "]")
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if ip.IsUnspecified() || slices.ContainsFunc(n.ips, ip.Equal) {
				continue
			}
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			n.ips = append(n.ips, ip)
			continue
		}
		h = strings.ToLower(h)
		if !slices.Contains(n.dns, h) {
			n.dns = append(n.dns, h)
		}
	}
	return n
}

// missing returns the first of n that cert does not cover, or "".
func (n names) missing(cert *x509.Certificate) string {
	for _, d := range n.dns {
		if !slices.ContainsFunc(cert.DNSNames, func(c string) bool { return strings.EqualFold(c, d) }) {
			return d
		}
	}
	for _, ip := range n.ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return ip.String()
		}
	}
	return ""
}

// newCA makes a self-signed CA valid from now for caLife.
func newCA(hostname string, now time.Time) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "staticlet-ca@" + hostname},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLife),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil)
}

// newServing makes a serving certificate for n, signed by ca.
func newServing(ca *keyPair, n names, now time.Time) (*keyPair, error) {
	return newLeaf(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: servingName},
		DNSNames:    n.dns,
		IPAddresses: n.ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now)
}

// newAdmin makes the admin client certificate, signed by ca.
func newAdmin(ca *keyPair, now time.Time) (*keyPair, error) {
	return newLeaf(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now)
}

// isAdmin tells whether cert has the admin certificate's subject and use.
func isAdmin(cert *x509.Certificate) bool {
	return cert.Subject.CommonName == AdminUser && slices.Equal(cert.Subject.Organization, []string{AdminGroup}) &&
		slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}

// newLeaf signs tmpl with ca, valid from now for leafLife, cut short
// where the CA ends first.
func newLeaf(ca *keyPair, tmpl *x509.Certificate, now time.Time) (*keyPair, error) {
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(leafLife)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	return sign(tmpl, ca)
}

// sign makes a P-256 key and the certificate tmpl for it, signed by ca,
// or self-signed where ca is nil.
func sign(tmpl *x509.Certificate, ca *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a key for %q: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("making a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	parent, parentKey := tmpl, key
	if ca != nil {
		parent, parentKey = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}
