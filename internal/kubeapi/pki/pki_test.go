package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

var allFiles = []string{caCertFile, caKeyFile, servingCertFile, servingKeyFile, adminCertFile, adminKeyFile}

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

// ensure runs Ensure and fails the test on an error.
func ensure(t *testing.T, dir string, opts Options) *Bundle {
	t.Helper()
	b, err := Ensure(dir, opts)
	if err != nil {
		t.Fatalf("Ensure(%s) = %v", dir, err)
	}
	return b
}

// contents reads every file of the directory.
func contents(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, f := range allFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		m[f] = data
	}
	return m
}

func parseCert(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatalf("no PEM block in %q", pemData)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestEnsureNewDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root", "api")
	b := ensure(t, dir, Options{Hostname: "node1", Hosts: []string{"api.example", "192.0.2.7", "[2001:db8::7]", "0.0.0.0", ""}, Now: clock(t0)})

	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s mode = %04o, want 0700", dir, fi.Mode().Perm())
	}
	for _, f := range allFiles {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %04o, want 0600", f, fi.Mode().Perm())
		}
	}
	if got := len(b.Issued()); got != 3 {
		t.Errorf("Issued() = %q, want the CA and two leaves", b.Issued())
	}

	files := contents(t, dir)
	ca := parseCert(t, files[caCertFile])
	if ca.Subject.CommonName != "staticlet-ca@node1" || !ca.IsCA || ca.NotAfter.Sub(t0) < 3650*day {
		t.Errorf("CA = %s, CA %v, until %s; want staticlet-ca@node1, a CA for 10 years", ca.Subject, ca.IsCA, ca.NotAfter)
	}
	if k, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("CA key = %T, want ECDSA P-256", ca.PublicKey)
	}

	serving := parseCert(t, files[servingCertFile])
	wantDNS := []string{"localhost", "node1", "api.example"}
	if !slices.Equal(serving.DNSNames, wantDNS) {
		t.Errorf("serving DNSNames = %q, want %q", serving.DNSNames, wantDNS)
	}
	var ips []string
	for _, ip := range serving.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "192.0.2.7", "2001:db8::7"}; !slices.Equal(ips, want) {
		t.Errorf("serving IPAddresses = %q, want %q", ips, want)
	}
	if !slices.Equal(serving.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || serving.CheckSignatureFrom(ca) != nil {
		t.Errorf("serving certificate: usage %v, signed by the CA: %v", serving.ExtKeyUsage, serving.CheckSignatureFrom(ca))
	}
	if !b.Certificate().Leaf.Equal(serving) {
		t.Errorf("Certificate() is not the serving certificate on disk")
	}

	admin := parseCert(t, files[adminCertFile])
	if !isAdmin(admin) || admin.CheckSignatureFrom(ca) != nil {
		t.Errorf("admin certificate = %s, usage %v; want CN=%s, O=%s, client auth, signed by the CA", admin.Subject, admin.ExtKeyUsage, AdminUser, AdminGroup)
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: b.Pool(), CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate does not verify against Pool(): %v", err)
	}
	if want := serving.NotAfter.Add(-serving.NotAfter.Sub(serving.NotBefore) / 3); !b.RenewAt().Equal(want) || b.RenewAt().Before(t0.Add(240*day)) {
		t.Errorf("RenewAt() = %s, want %s, about 8 months on", b.RenewAt(), want)
	}
}

func TestEnsureAgain(t *testing.T) {
	leaves := func(pair ...string) []string { return pair }
	serving := leaves(servingCertFile, servingKeyFile)
	admin := leaves(adminCertFile, adminKeyFile)
	for _, tc := range []struct {
		name     string
		prepare  func(t *testing.T, dir string)
		after    time.Duration
		hostname string
		hosts    []string
		// changed are the files issued again; wantErr, what the error
		// says, with DIR for the directory.
		changed []string
		wantErr string
	}{
		{name: "reused"},
		{name: "a host dropped is still covered", hosts: []string{}},
		{name: "a new host", hosts: []string{"api.example", "10.0.0.5"}, changed: serving},
		{name: "a new hostname", hostname: "node2", changed: serving},
		{name: "not due yet", after: 200 * day},
		{name: "due", after: 250 * day, changed: slices.Concat(serving, admin)},
		{name: "expired", after: 400 * day, changed: slices.Concat(serving, admin)},
		{name: "clock before the leaves", after: -day, changed: slices.Concat(serving, admin)},
		{name: "CA expired", after: 3651 * day, changed: allFiles},
		{name: "CA certificate missing", prepare: remove(caCertFile), changed: allFiles},
		{name: "leaf missing", prepare: remove(adminCertFile), changed: admin},
		{name: "leaf key missing", prepare: remove(servingKeyFile), changed: serving},
		{name: "leaf key mismatch", prepare: copyFile(adminKeyFile, servingKeyFile), changed: serving},
		{name: "leaf of another CA", prepare: otherCA(servingCertFile, servingKeyFile), changed: serving},
		{name: "admin certificate as serving", prepare: func(t *testing.T, dir string) {
			copyFile(adminCertFile, servingCertFile)(t, dir)
			copyFile(adminKeyFile, servingKeyFile)(t, dir)
		}, changed: serving},
		{name: "CA key missing", prepare: remove(caKeyFile), wantErr: "DIR/ca.key is missing beside DIR/ca.crt"},
		{name: "CA key mismatch", prepare: copyFile(adminKeyFile, caKeyFile), wantErr: "the key in DIR/ca.key is not the one of DIR/ca.crt"},
		{name: "CA not a CA", prepare: func(t *testing.T, dir string) {
			copyFile(adminCertFile, caCertFile)(t, dir)
			copyFile(adminKeyFile, caKeyFile)(t, dir)
		}, wantErr: "DIR/ca.crt is not a CA certificate"},
		{name: "corrupt CA certificate", prepare: write(caCertFile, "garbage"), wantErr: "DIR/ca.crt holds no PEM certificate"},
		{name: "corrupt CA key", prepare: write(caKeyFile, "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"), wantErr: "parsing the key in DIR/ca.key"},
		{name: "corrupt serving certificate", prepare: write(servingCertFile, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), wantErr: "parsing the certificate in DIR/serving.crt"},
		{name: "corrupt serving key", prepare: write(servingKeyFile, ""), wantErr: "DIR/serving.key holds no PEM EC private key"},
		{name: "corrupt admin certificate", prepare: write(adminCertFile, "x"), wantErr: "DIR/admin.crt holds no PEM certificate"},
		{name: "corrupt admin key", prepare: write(adminKeyFile, "x"), wantErr: "DIR/admin.key holds no PEM EC private key"},
		{name: "key readable by group", prepare: chmod(servingKeyFile, 0o640), wantErr: "DIR/serving.key has mode 0640, open to group or others"},
		{name: "certificate readable by others", prepare: chmod(caCertFile, 0o604), wantErr: "DIR/ca.crt has mode 0604"},
		{name: "directory open to others", prepare: chmod(".", 0o755), wantErr: "DIR has mode 0755"},
		{name: "unreadable", prepare: func(t *testing.T, dir string) {
			if os.Geteuid() == 0 {
				t.Skip("root reads every file")
			}
			chmod(adminKeyFile, 0o200)(t, dir)
		}, wantErr: "DIR/admin.key: permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "api")
			ensure(t, dir, Options{Hostname: "node1", Hosts: []string{"api.example"}, Now: clock(t0)})
			before := contents(t, dir)
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			hostname := "node1"
			if tc.hostname != "" {
				hostname = tc.hostname
			}
			hosts := []string{"api.example"}
			if tc.hosts != nil {
				hosts = tc.hosts
			}
			b, err := Ensure(dir, Options{Hostname: hostname, Hosts: hosts, Now: clock(t0.Add(tc.after))})
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "DIR", dir)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Ensure() = %v, want an error with %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ensure() = %v", err)
			}
			after := contents(t, dir)
			var changed []string
			for _, f := range allFiles {
				if string(before[f]) != string(after[f]) {
					changed = append(changed, f)
				}
			}
			if !slices.Equal(changed, tc.changed) {
				t.Errorf("files changed = %q, want %q", changed, tc.changed)
			}
			if len(b.Issued()) != len(tc.changed)/2 {
				t.Errorf("Issued() = %q, want a line for each pair issued", b.Issued())
			}
			// Whatever was issued is current and consistent.
			if _, err := Ensure(dir, Options{Hostname: hostname, Hosts: hosts, Now: clock(t0.Add(tc.after))}); err != nil {
				t.Fatalf("Ensure() again = %v", err)
			}
			if again := contents(t, dir); !mapsEqual(after, again) {
				t.Errorf("a third Ensure issued again")
			}
		})
	}
}

func mapsEqual(a, b map[string][]byte) bool {
	for k := range a {
		if string(a[k]) != string(b[k]) {
			return false
		}
	}
	return len(a) == len(b)
}

func remove(file string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, file)); err != nil {
			t.Fatal(err)
		}
	}
}

func write(file, data string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(from, to string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		data, err := os.ReadFile(filepath.Join(dir, from))
		if err != nil {
			t.Fatal(err)
		}
		write(to, string(data))(t, dir)
	}
}

func chmod(file string, mode fs.FileMode) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Chmod(filepath.Join(dir, file), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// otherCA puts the pair of a directory of its own in dir.
func otherCA(certFile, keyFile string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		other := filepath.Join(t.TempDir(), "other")
		ensure(t, other, Options{Hostname: "node1", Hosts: []string{"api.example"}, Now: clock(t0)})
		files := contents(t, other)
		write(certFile, string(files[certFile]))(t, dir)
		write(keyFile, string(files[keyFile]))(t, dir)
	}
}

func TestRefresh(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "api")
	now := t0
	b := ensure(t, dir, Options{Hostname: "node1", Now: func() time.Time { return now }})
	first, renew := b.Certificate(), b.RenewAt()
	cfg := b.ServerConfig()

	if err := b.Refresh(nil); err != nil {
		t.Fatalf("Refresh() = %v", err)
	}
	if b.Certificate() != first || len(b.Issued()) != 0 {
		t.Fatalf("Refresh() before RenewAt issued %q", b.Issued())
	}

	now = renew
	if err := b.Refresh(nil); err != nil {
		t.Fatalf("Refresh() at RenewAt = %v", err)
	}
	if len(b.Issued()) != 2 || !b.RenewAt().After(renew) {
		t.Errorf("Refresh() at RenewAt issued %q, RenewAt %s; want both leaves, a later RenewAt", b.Issued(), b.RenewAt())
	}
	got, err := cfg.GetCertificate(nil)
	if err != nil || got == first || got != b.Certificate() {
		t.Errorf("the server's GetCertificate = %v, %v; want the new certificate", got, err)
	}

	if err := b.Refresh([]string{"10.0.0.9"}); err != nil {
		t.Fatalf("Refresh(10.0.0.9) = %v", err)
	}
	if leaf := b.Certificate().Leaf; !slices.ContainsFunc(leaf.IPAddresses, net.ParseIP("10.0.0.9").Equal) {
		t.Errorf("after Refresh(10.0.0.9) the serving certificate covers %v", leaf.IPAddresses)
	}

	// Near the CA's end the leaves last as long as the CA, and are not
	// issued again until it expires.
	caEnd := b.ca.cert.NotAfter
	now = caEnd.Add(-10 * day)
	if err := b.Refresh(nil); err != nil || len(b.Issued()) != 2 || !b.RenewAt().Equal(caEnd) {
		t.Errorf("Refresh() 10 days before the CA expires = %v, issued %q, RenewAt %s; want both leaves, RenewAt %s", err, b.Issued(), b.RenewAt(), caEnd)
	}
	now = caEnd.Add(-day)
	if err := b.Refresh(nil); err != nil || len(b.Issued()) != 0 {
		t.Errorf("Refresh() a day before the CA expires = %v, issued %q; want nothing", err, b.Issued())
	}

	now = caEnd
	if err := b.Refresh(nil); err == nil || !strings.Contains(err.Error(), "restart staticlet") {
		t.Errorf("Refresh() after the CA expired = %v, want an error asking for a restart", err)
	}
}

func TestReadClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "api")
	if _, err := ReadClient(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadClient(missing) = %v, want fs.ErrNotExist", err)
	}
	b := ensure(t, dir, Options{Hostname: "node1"})
	got, err := ReadClient(dir)
	if err != nil {
		t.Fatalf("ReadClient() = %v", err)
	}
	want := b.Client()
	if string(got.CAPEM) != string(want.CAPEM) || string(got.CertPEM) != string(want.CertPEM) || string(got.KeyPEM) != string(want.KeyPEM) || !got.NotAfter.Equal(want.NotAfter) {
		t.Errorf("ReadClient() differs from Bundle.Client()")
	}
	otherCA(adminCertFile, adminKeyFile)(t, dir)
	if _, err := ReadClient(dir); err == nil || !strings.Contains(err.Error(), "not signed by the CA") {
		t.Errorf("ReadClient(admin of another CA) = %v", err)
	}
}

func TestAddress(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadAddress(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadAddress(none) = %v, want fs.ErrNotExist", err)
	}
	for _, addr := range []string{"127.0.0.1:6443", "[::]:6443", "node1:443"} {
		if err := WriteAddress(dir, addr); err != nil {
			t.Fatalf("WriteAddress(%q) = %v", addr, err)
		}
		if got, err := ReadAddress(dir); got != addr || err != nil {
			t.Errorf("ReadAddress() = %q, %v; want %q", got, err, addr)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, AddressFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("address file: %v, mode %04o; want 0600", err, fi.Mode().Perm())
	}
	if err := WriteAddress(dir, "6443"); err == nil {
		t.Errorf("WriteAddress(6443) = nil, want an error")
	}
	write(AddressFile, "nonsense\n")(t, dir)
	if _, err := ReadAddress(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, AddressFile)) {
		t.Errorf("ReadAddress(nonsense) = %v, want an error naming the file", err)
	}
}
