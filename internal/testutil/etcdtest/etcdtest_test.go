package etcdtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// TestWritePKI checks each certificate verifies against the CA for what
// etcd uses it for.
func TestWritePKI(t *testing.T) {
	dir := t.TempDir()
	if err := WritePKI(dir); err != nil {
		t.Fatalf("WritePKI: %v", err)
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, CA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	tests := []struct {
		name  string
		host  string // "" for a client certificate
		usage x509.ExtKeyUsage
	}{
		{Server, "127.0.0.1", x509.ExtKeyUsageServerAuth},
		{Server, "localhost", x509.ExtKeyUsageServerAuth},
		{Peer, "127.0.0.1", x509.ExtKeyUsageServerAuth},
		{Peer, "", x509.ExtKeyUsageClientAuth},
		{HealthcheckClient, "", x509.ExtKeyUsageClientAuth},
	}
	for _, tt := range tests {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, tt.name+".crt"), filepath.Join(dir, tt.name+".key"))
		if err != nil {
			t.Fatalf("loading %s: %v", tt.name, err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		opts := x509.VerifyOptions{Roots: pool, DNSName: tt.host, KeyUsages: []x509.ExtKeyUsage{tt.usage}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s for %q, usage %v: %v", tt.name, tt.host, tt.usage, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, CA+".key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s.key: %v, mode %v, want 0600", CA, err, fi.Mode())
	}
}

// TestBuildAndRun builds etcd (minutes the first time on a machine) and
// runs it as a plain process, as Member's flags configure it with
// WritePKI's certificates: it turns healthy, and a key put through Client
// reads back.
func TestBuildAndRun(t *testing.T) {
	tier.Integration(t, "etcd built from the Go module proxy")
	ctx, cancel := context.WithTimeout(t.Context(), BuildTimeout)
	defer cancel()
	start := time.Now()
	bin, err := Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd %s at %s (%.1fs)", Version, bin, time.Since(start).Seconds())
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if want := "etcd Version: " + strings.TrimPrefix(Version, "v"); err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("%s --version = %q, %v; want %q in it", bin, out, err, want)
	}
	if _, err := Archive(bin); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if err := WritePKI(pki); err != nil {
		t.Fatal(err)
	}
	m, err := NewMember("test")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, m.Flags(pki, filepath.Join(dir, "data"))...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("etcd's output:\n%s", log.String())
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		err := Healthy(hctx, m.HealthURL())
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd not healthy after 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := NewClient(m.ClientURL(), pki)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, "/staticlet/test", "value"); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Get(ctx, "/staticlet/test")
	if err != nil || !ok || got != "value" {
		t.Errorf("Get(/staticlet/test) = %q, %v, %v; want \"value\", true, nil", got, ok, err)
	}
	if got, ok, err := c.Get(ctx, "/staticlet/missing"); err != nil || ok {
		t.Errorf("Get(/staticlet/missing) = %q, %v, %v; want not found", got, ok, err)
	}
}
