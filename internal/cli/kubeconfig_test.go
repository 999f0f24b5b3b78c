package cli

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/staticlet/staticlet/internal/kubeapi/pki"
)

func TestKubeconfigCommand(t *testing.T) {
	root := t.TempDir()
	api := filepath.Join(root, "api")

	out, code := runCLI(t, "kubeconfig", "--root-dir", root)
	if code == 0 || !strings.Contains(out, "start staticlet with --api-address first") {
		t.Errorf("kubeconfig before any certificates = %d, %q; want it to ask for --api-address", code, out)
	}

	b, err := pki.Ensure(api, pki.Options{Hostname: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	out, code = runCLI(t, "kubeconfig", "--root-dir", root)
	if code == 0 || !strings.Contains(out, filepath.Join(api, pki.AddressFile)) {
		t.Errorf("kubeconfig without a recorded address = %d, %q; want an error naming the address file", code, out)
	}
	if err := pki.WriteAddress(api, "0.0.0.0:6443"); err != nil {
		t.Fatal(err)
	}

	out, code = runCLI(t, "kubeconfig", "--root-dir", root)
	if code != 0 {
		t.Fatalf("kubeconfig = %d, %q", code, out)
	}
	cfg, err := clientcmd.Load([]byte(out))
	if err != nil {
		t.Fatalf("clientcmd.Load(kubeconfig) = %v\n%s", err, out)
	}
	if cfg.CurrentContext != "staticlet" {
		t.Errorf("current-context = %q, want staticlet", cfg.CurrentContext)
	}
	rest, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		t.Fatalf("the kubeconfig's client config: %v", err)
	}
	if rest.Host != "https://127.0.0.1:6443" {
		t.Errorf("server = %q, want https://127.0.0.1:6443", rest.Host)
	}

	// The client certificate is the admin's and verifies against the
	// CA the kubeconfig carries, which is the node's.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rest.CAData) || !roots.Equal(b.Pool()) {
		t.Errorf("the kubeconfig's CA is not the node's")
	}
	block, _ := pem.Decode(rest.CertData)
	if block == nil {
		t.Fatalf("no client certificate in the kubeconfig")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate does not verify against the CA: %v", err)
	}
	if cert.Subject.CommonName != pki.AdminUser || len(rest.KeyData) == 0 {
		t.Errorf("client certificate of %s, key of %d bytes; want %s with its key", cert.Subject, len(rest.KeyData), pki.AdminUser)
	}

	file := filepath.Join(t.TempDir(), "kubeconfig")
	if out, code := runCLI(t, "kubeconfig", "--root-dir", root, "--api-address", "[2001:db8::1]:7443", "-o", file); code != 0 || out != "" {
		t.Fatalf("kubeconfig -o = %d, %q", code, out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig -o FILE: %v, mode %04o; want 0600", err, fi.Mode().Perm())
	}
	if cfg, err := clientcmd.LoadFromFile(file); err != nil || cfg.Clusters["staticlet"].Server != "https://[2001:db8::1]:7443" {
		t.Errorf("kubeconfig -o FILE with --api-address: %v, %+v", err, cfg)
	}
}

func TestKubeconfigExpired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "api")
	b, err := pki.Ensure(dir, pki.Options{Hostname: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubeconfig(dir, "6443", "", b.Client().NotAfter.Add(time.Second))
	if err == nil || !strings.Contains(err.Error(), "restart staticlet") {
		t.Errorf("kubeconfig with the admin certificate expired = %v, want an error asking for a restart", err)
	}
}

func TestServerURL(t *testing.T) {
	for _, tc := range []struct{ address, want, wantErr string }{
		{address: "6443", want: "https://127.0.0.1:6443"},
		{address: ":6443", want: "https://127.0.0.1:6443"},
		{address: "0.0.0.0:6443", want: "https://127.0.0.1:6443"},
		{address: "[::]:6443", want: "https://127.0.0.1:6443"},
		{address: "192.0.2.7:443", want: "https://192.0.2.7:443"},
		{address: "[::1]:6443", want: "https://[::1]:6443"},
		{address: "node1.example:6443", want: "https://node1.example:6443"},
		{address: "node1.example", wantErr: "missing port"},
		{address: "node1.example:http", wantErr: "bad port"},
		{address: "node1.example:0", wantErr: "bad port"},
	} {
		got, err := serverURL(tc.address)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("serverURL(%q) = %q, %v; want an error with %q", tc.address, got, err, tc.wantErr)
			}
			continue
		}
		if got != tc.want || err != nil {
			t.Errorf("serverURL(%q) = %q, %v; want %q", tc.address, got, err, tc.want)
		}
	}
}

// TestKubeconfigView: --view prints a kubeconfig with a new viewer's
// certificate at each run, of the CA, named after --user.
func TestKubeconfigView(t *testing.T) {
	root := t.TempDir()
	api := filepath.Join(root, "api")
	if out, code := runCLI(t, "kubeconfig", "--root-dir", root, "--view"); code == 0 || !strings.Contains(out, "start staticlet with --api-address first") {
		t.Errorf("kubeconfig --view before any certificates = %d, %q; want it to ask for --api-address", code, out)
	}
	b, err := pki.Ensure(api, pki.Options{Hostname: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteAddress(api, "127.0.0.1:6443"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--user", "dash"}, {"--view", "--user", ""}} {
		if out, code := runCLI(t, append([]string{"kubeconfig", "--root-dir", root}, args...)...); code == 0 || !strings.Contains(out, "--user") {
			t.Errorf("kubeconfig %s = %d, %q; want an error about --user", strings.Join(args, " "), code, out)
		}
	}

	subject := func(args ...string) (*x509.Certificate, string) {
		t.Helper()
		out, code := runCLI(t, append([]string{"kubeconfig", "--root-dir", root, "--view"}, args...)...)
		if code != 0 {
			t.Fatalf("kubeconfig --view %v = %d, %q", args, code, out)
		}
		cfg, err := clientcmd.Load([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		rest, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(rest.CertData)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: b.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the viewer's certificate does not verify against the CA: %v", err)
		}
		return cert, cfg.CurrentContext
	}
	cert, ctx := subject()
	if cert.Subject.CommonName != pki.ViewerUser || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != pki.ViewerGroup || ctx != pki.ViewerUser+"@staticlet" {
		t.Errorf("kubeconfig --view: certificate of %s, context %q; want %s of %s", cert.Subject, ctx, pki.ViewerUser, pki.ViewerGroup)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life < 364*24*time.Hour || life > 366*24*time.Hour {
		t.Errorf("the viewer's certificate lasts %s, want a year", life)
	}
	again, ctx := subject("--user", "dashboard")
	if again.Subject.CommonName != "dashboard" || ctx != "dashboard@staticlet" || again.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Errorf("kubeconfig --view --user dashboard: certificate of %s (serial %s, the first's %s), context %q", again.Subject, again.SerialNumber, cert.SerialNumber, ctx)
	}
}
