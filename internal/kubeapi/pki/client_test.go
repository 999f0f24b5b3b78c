package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestIssueClient: a client certificate of the given subject, signed by
// the directory's CA for client authentication, a year long, new at each
// call, and nothing written.
func TestIssueClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "api")
	if _, err := IssueClient(dir, ViewerUser, []string{ViewerGroup}, t0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("IssueClient without a CA = %v, want fs.ErrNotExist", err)
	}
	ensure(t, dir, Options{Hostname: "node1", Now: clock(t0)})
	before := contents(t, dir)

	now := t0.Add(10 * day)
	c, err := IssueClient(dir, "dashboard", []string{ViewerGroup}, now)
	if err != nil {
		t.Fatal(err)
	}
	after := contents(t, dir)
	if len(after) != len(before) {
		t.Errorf("IssueClient wrote files: %d before, %d after", len(before), len(after))
	}
	for name, data := range after {
		if string(before[name]) != string(data) {
			t.Errorf("IssueClient changed %s", name)
		}
	}
	block, _ := pem.Decode(c.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.CAPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not verify as a client of the CA: %v", err)
	}
	if cert.Subject.CommonName != "dashboard" || !slices.Equal(cert.Subject.Organization, []string{ViewerGroup}) {
		t.Errorf("subject = %s, want CN=dashboard, O=%s", cert.Subject, ViewerGroup)
	}
	if !cert.NotAfter.Equal(now.Add(leafLife)) || !c.NotAfter.Equal(cert.NotAfter) {
		t.Errorf("NotAfter = %s (Client says %s), want a year from now", cert.NotAfter, c.NotAfter)
	}
	if _, err := readKeyPEM(c.KeyPEM); err != nil {
		t.Errorf("the key: %v", err)
	}
	again, err := IssueClient(dir, "dashboard", []string{ViewerGroup}, now)
	if err != nil || string(again.CertPEM) == string(c.CertPEM) || string(again.KeyPEM) == string(c.KeyPEM) {
		t.Errorf("a second IssueClient = %v, the same certificate or key: want a new one", err)
	}

	if _, err := IssueClient(dir, "", nil, now); err == nil {
		t.Errorf("IssueClient of an empty user succeeded")
	}
	if _, err := IssueClient(dir, "late", nil, t0.Add(caLife)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("IssueClient after the CA expired = %v, want an error saying so", err)
	}
	if err := os.Chmod(filepath.Join(dir, caKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := IssueClient(dir, "dashboard", nil, now); err == nil || !strings.Contains(err.Error(), caKeyFile) {
		t.Errorf("IssueClient with a CA key open to others = %v, want an error naming it", err)
	}
}

// readKeyPEM parses an EC private key in PEM.
func readKeyPEM(data []byte) (any, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseECPrivateKey(block.Bytes)
}
