package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/staticlet/staticlet/internal/status"
)

// testCA is a certificate authority for a test: the server's certificate
// and clients' certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key in PEM for cn, for a server
// (serving 127.0.0.1) or a client.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// testAPI is a Server under test, served over TLS on loopback.
type testAPI struct {
	store *status.Store
	srv   *Server
	url   string
	ca    *testCA
	// config is a client-go config with the admin's client certificate.
	config *rest.Config
}

// newTestAPI serves New(cfg) over TLS, asking clients for certificates of
// its own test CA. cfg.Store, when nil, is a new store.
func newTestAPI(t *testing.T, cfg Config) *testAPI {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = status.NewStore()
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "node1"
	}
	ca := newTestCA(t)
	srv := New(cfg)
	ts := httptest.NewUnstartedServer(srv.Handler())
	certPEM, keyPEM := ca.issue(t, "127.0.0.1", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.pool, ClientAuth: tls.VerifyClientCertIfGiven}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	clientCert, clientKey := ca.issue(t, "staticlet-admin", false)
	return &testAPI{
		store: cfg.Store, srv: srv, url: ts.URL, ca: ca,
		config: &rest.Config{
			Host: ts.URL,
			TLSClientConfig: rest.TLSClientConfig{
				CAData: ca.pem, CertData: clientCert, KeyData: clientKey,
			},
		},
	}
}

// clientset is a client-go clientset for the API, as the admin.
func (a *testAPI) clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(a.config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// anonymous is a client-go config that trusts the server but presents no
// certificate.
func (a *testAPI) anonymous() *rest.Config {
	c := rest.CopyConfig(a.config)
	c.CertData, c.KeyData = nil, nil
	return c
}
