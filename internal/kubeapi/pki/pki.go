package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Options say what the certificates are for.
type Options struct {
	// Hostname is the node's name, in the CA's name and the serving
	// certificate's; empty means os.Hostname().
	Hostname string
	// Hosts are the further DNS names and IP addresses the serving
	// certificate covers besides localhost, 127.0.0.1, ::1 and the
	// hostname: the API address's host, or the node's addresses where
	// the API listens on a wildcard address. Wildcard addresses here are
	// skipped.
	Hosts []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Bundle is the directory's certificates, loaded and current.
type Bundle struct {
	dir      string
	hostname string
	now      func() time.Time
	// ca and pool are set by Ensure and never change: a CA is replaced
	// only at a start.
	ca   *keyPair
	pool *x509.CertPool
	// serving is what the server's handshakes present; Refresh swaps it.
	serving atomic.Pointer[tls.Certificate]

	// mu guards the fields below, and the leaves' files.
	mu     sync.Mutex
	leaf   *keyPair
	admin  *keyPair
	issued []string
}

// Client is what a kubeconfig needs to reach the API as its admin: the
// CA, and the admin's certificate and key, as PEM.
type Client struct {
	CAPEM, CertPEM, KeyPEM []byte
	// NotAfter is when the admin certificate expires.
	NotAfter time.Time
}

// Ensure loads the certificates in dir, making the directory and
// whatever is missing or due, and returns them. The CA is made only
// where there is none or where it has expired; the leaves are issued
// again where they are missing, do not match their key, are not the
// CA's, are due (RenewAt) or, for the serving certificate, do not
// cover opts' names.
func Ensure(dir string, opts Options) (*Bundle, error) {
	b := &Bundle{dir: dir, hostname: opts.Hostname, now: opts.Now}
	if b.now == nil {
		b.now = time.Now
	}
	if b.hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("API certificates: reading the hostname: %w", err)
		}
		b.hostname = h
	}
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("API certificates: %w", err)
	}
	ca, note, err := loadCA(dir, b.hostname, b.now())
	if err != nil {
		return nil, fmt.Errorf("API certificates: %w", err)
	}
	b.ca = ca
	b.pool = x509.NewCertPool()
	b.pool.AddCert(ca.cert)
	b.mu.Lock()
	defer b.mu.Unlock()
	if note != "" {
		b.issued = append(b.issued, note)
	}
	if err := b.refresh(opts.Hosts); err != nil {
		return nil, fmt.Errorf("API certificates: %w", err)
	}
	return b, nil
}

// loadCA reads the CA in dir, or makes one where there is none or it has
// expired; the note says what was made, for the log.
func loadCA(dir, hostname string, now time.Time) (*keyPair, string, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	var note string
	ca, err := readPair(dir, caCertFile, caKeyFile)
	switch {
	case err == nil && !ca.cert.IsCA:
		return nil, "", fmt.Errorf("%s is not a CA certificate", certPath)
	case err == nil && now.Before(ca.cert.NotAfter):
		return ca, "", nil
	case err == nil:
		note = fmt.Sprintf("CA: the one in %s expired at %s; made a new one, so every kubeconfig made before must be made again", certPath, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	case errors.Is(err, fs.ErrNotExist):
		// A key without its certificate is a first start that stopped
		// between the two writes: nothing has been signed with it. A
		// certificate without its key cannot sign, and replacing it
		// would silently invalidate every kubeconfig.
		if _, serr := os.Stat(certPath); !errors.Is(serr, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("%s is missing beside %s, so the CA cannot sign: restore it, or remove the directory to have a new CA made (every kubeconfig must then be made again)", keyPath, certPath)
		}
		note = "CA: made a new one in " + certPath
	default:
		return nil, "", err
	}
	ca, err = newCA(hostname, now)
	if err != nil {
		return nil, "", err
	}
	if err := writePair(dir, caCertFile, caKeyFile, ca); err != nil {
		return nil, "", err
	}
	return ca, note, nil
}

// Refresh checks the leaves again, as Ensure does at a start, with the
// hosts the serving certificate must now cover (as Options.Hosts), and
// issues those due; a new serving certificate is presented from the next
// handshake on. An expired CA is an error: it is replaced only at a
// start.
func (b *Bundle) Refresh(hosts []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.issued = nil
	if err := b.refresh(hosts); err != nil {
		return fmt.Errorf("API certificates: %w", err)
	}
	return nil
}

// refresh is Refresh with b.mu held.
func (b *Bundle) refresh(hosts []string) error {
	now := b.now()
	if !now.Before(b.ca.cert.NotAfter) {
		return fmt.Errorf("the CA in %s expired at %s: restart staticlet to have a new one made", filepath.Join(b.dir, caCertFile), b.ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	n := servingNames(b.hostname, hosts)
	leaf, err := b.ensureLeaf("serving certificate", servingCertFile, servingKeyFile, now,
		func(c *x509.Certificate) string {
			if m := n.missing(c); m != "" {
				return "it does not cover " + m
			}
			return ""
		},
		func() (*keyPair, error) { return newServing(b.ca, n, now) })
	if err != nil {
		return err
	}
	admin, err := b.ensureLeaf("admin certificate", adminCertFile, adminKeyFile, now,
		func(c *x509.Certificate) string {
			if !isAdmin(c) {
				return "it is not " + AdminUser + " of " + AdminGroup + " for client authentication"
			}
			return ""
		},
		func() (*keyPair, error) { return newAdmin(b.ca, now) })
	if err != nil {
		return err
	}
	if b.leaf == nil || !bytes.Equal(b.leaf.certPEM, leaf.certPEM) {
		tc, err := tls.X509KeyPair(leaf.certPEM, leaf.keyPEM)
		if err != nil {
			return fmt.Errorf("loading %s: %w", filepath.Join(b.dir, servingCertFile), err)
		}
		b.serving.Store(&tc)
	}
	b.leaf, b.admin = leaf, admin
	return nil
}

// ensureLeaf reads a leaf and issues it again where it is missing, does
// not match its key, is not the CA's, is not valid yet or is due, or
// where wrong says what is wrong with it.
func (b *Bundle) ensureLeaf(what, certFile, keyFile string, now time.Time, wrong func(*x509.Certificate) string, issue func() (*keyPair, error)) (*keyPair, error) {
	p, err := readPair(b.dir, certFile, keyFile)
	var why string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "there was none"
	case errors.Is(err, errMismatch):
		why = "its key did not match"
	case err != nil:
		return nil, err
	case p.cert.CheckSignatureFrom(b.ca.cert) != nil:
		why = "it was not signed by the CA"
	case now.Before(p.cert.NotBefore):
		why = "it was not valid before " + p.cert.NotBefore.UTC().Format(time.RFC3339)
	case !now.Before(b.dueAt(p.cert)):
		why = "it expires at " + p.cert.NotAfter.UTC().Format(time.RFC3339)
	default:
		why = wrong(p.cert)
	}
	if why == "" {
		return p, nil
	}
	p, err = issue()
	if err != nil {
		return nil, err
	}
	if err := writePair(b.dir, certFile, keyFile, p); err != nil {
		return nil, err
	}
	b.issued = append(b.issued, fmt.Sprintf("%s: issued a new one in %s, valid until %s, since %s", what, filepath.Join(b.dir, certFile), p.cert.NotAfter.UTC().Format(time.RFC3339), why))
	return p, nil
}

// Issued says what the last Ensure or Refresh made or issued, and why,
// one line each, for the log.
func (b *Bundle) Issued() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.issued...)
}

// RenewAt is when Refresh next has a leaf to issue: a third of its life
// before the first of them expires, or when the CA expires where the
// leaves last as long as the CA already.
func (b *Bundle) RenewAt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.dueAt(b.leaf.cert)
	if a := b.dueAt(b.admin.cert); a.Before(t) {
		t = a
	}
	return t
}

// dueAt is when a leaf is to be issued again: a third of its life before
// it expires, unless it lasts as long as the CA, where a new one could
// last no longer; then when the CA expires.
func (b *Bundle) dueAt(cert *x509.Certificate) time.Time {
	if !cert.NotAfter.Before(b.ca.cert.NotAfter) {
		return b.ca.cert.NotAfter
	}
	return renewAt(cert)
}

// Pool holds the CA: the roots a client verifies the server with, and
// those the server verifies clients with.
func (b *Bundle) Pool() *x509.CertPool { return b.pool }

// Certificate is the serving certificate the server presents now.
func (b *Bundle) Certificate() *tls.Certificate { return b.serving.Load() }

// Client is what a kubeconfig for the admin needs, as it is now.
func (b *Bundle) Client() Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Client{CAPEM: b.ca.certPEM, CertPEM: b.admin.certPEM, KeyPEM: b.admin.keyPEM, NotAfter: b.admin.cert.NotAfter}
}

// ServerConfig is the TLS configuration of the API's server: TLS 1.2 or
// later, the serving certificate taken at each handshake (so a Refresh
// needs no restart), and client certificates verified against the CA
// when given. A client may connect without one, so that the server can
// answer 401 as the apiserver does; the handler checks
// Request.TLS.PeerCertificates. NextProtos is left to the server
// (http.Server.ServeTLS offers h2 and http/1.1).
func (b *Bundle) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  b.pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return b.serving.Load(), nil
		},
	}
}

// ReadClient reads what a kubeconfig for the admin needs from dir,
// without making or changing anything. Missing certificates give an
// error that wraps fs.ErrNotExist.
func ReadClient(dir string) (Client, error) {
	ca, caPEM, err := readCert(filepath.Join(dir, caCertFile))
	if err != nil {
		return Client{}, err
	}
	admin, err := readPair(dir, adminCertFile, adminKeyFile)
	if err != nil {
		return Client{}, err
	}
	if err := admin.cert.CheckSignatureFrom(ca); err != nil {
		return Client{}, fmt.Errorf("the certificate in %s is not signed by the CA in %s (restart staticlet to issue it again): %w",
			filepath.Join(dir, adminCertFile), filepath.Join(dir, caCertFile), err)
	}
	return Client{CAPEM: caPEM, CertPEM: admin.certPEM, KeyPEM: admin.keyPEM, NotAfter: admin.cert.NotAfter}, nil
}
