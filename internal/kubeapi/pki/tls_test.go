package pki

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// handshake is what the server side of one connection saw.
type handshake struct {
	err  error
	peer []*x509.Certificate
}

func TestHandshake(t *testing.T) {
	b := ensure(t, filepath.Join(t.TempDir(), "api"), Options{Hostname: "node1", Hosts: []string{"10.1.2.3"}})
	other := ensure(t, filepath.Join(t.TempDir(), "api"), Options{Hostname: "node1"})
	pair := func(c Client) []tls.Certificate {
		tc, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{tc}
	}
	serving := []tls.Certificate{*b.Certificate()}

	for _, tc := range []struct {
		name       string
		serverName string
		certs      []tls.Certificate
		maxVersion uint16
		roots      *x509.CertPool
		// wantPeer is the client's name the server sees; wantErr, what
		// the server's handshake error says.
		wantPeer string
		wantErr  string
		// wantClientErr is what the client's handshake error says.
		wantClientErr string
	}{
		{name: "admin", serverName: "localhost", certs: pair(b.Client()), wantPeer: AdminUser},
		{name: "admin by IP", serverName: "10.1.2.3", certs: pair(b.Client()), wantPeer: AdminUser},
		{name: "admin over TLS 1.2", serverName: "node1", certs: pair(b.Client()), maxVersion: tls.VersionTLS12, wantPeer: AdminUser},
		{name: "no certificate", serverName: "127.0.0.1"},
		{name: "another CA's admin", serverName: "localhost", certs: pair(other.Client()), wantErr: "certificate signed by unknown authority"},
		{name: "serving certificate as a client's", serverName: "localhost", certs: serving, wantErr: "incompatible key usage"},
		{name: "a client trusting another CA", serverName: "localhost", roots: other.Pool(), wantClientErr: "certificate signed by unknown authority"},
		{name: "a name not covered", serverName: "elsewhere.example", wantClientErr: "not elsewhere.example"},
		{name: "TLS 1.1", serverName: "localhost", maxVersion: tls.VersionTLS11, wantErr: "unsupported versions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := tls.Listen("tcp", "127.0.0.1:0", b.ServerConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan handshake, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- handshake{err: err}
					return
				}
				defer c.Close()
				conn := c.(*tls.Conn)
				err = conn.Handshake()
				done <- handshake{err: err, peer: conn.ConnectionState().PeerCertificates}
			}()

			roots := b.Pool()
			if tc.roots != nil {
				roots = tc.roots
			}
			client, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
				RootCAs:      roots,
				ServerName:   tc.serverName,
				Certificates: tc.certs,
				MinVersion:   tls.VersionTLS10,
				MaxVersion:   tc.maxVersion,
			})
			if err == nil {
				defer client.Close()
				// TLS 1.3 finishes the client's handshake before the
				// server has judged its certificate; a read waits for
				// the verdict (an alert, or the server's close).
				client.SetReadDeadline(time.Now().Add(10 * time.Second))
				client.Read(make([]byte, 1))
			} else if tc.wantErr == "" && tc.wantClientErr == "" {
				t.Fatalf("the client's handshake = %v", err)
			}
			got := <-done
			if tc.wantClientErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantClientErr) {
					t.Errorf("the client's handshake = %v, want an error with %q", err, tc.wantClientErr)
				}
				return
			}

			if tc.wantErr != "" {
				if got.err == nil || !strings.Contains(got.err.Error(), tc.wantErr) {
					t.Errorf("the server's handshake = %v, want an error with %q", got.err, tc.wantErr)
				}
				return
			}
			if got.err != nil {
				t.Fatalf("the server's handshake = %v", got.err)
			}
			var peer string
			if len(got.peer) > 0 {
				peer = got.peer[0].Subject.CommonName
			}
			if peer != tc.wantPeer {
				t.Errorf("the server's peer = %q, want %q", peer, tc.wantPeer)
			}
		})
	}
}
