package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// Client talks to etcd's v3 API through the JSON gateway on its client URL
// (on by default in 3.5), over TLS with the HealthcheckClient certificate,
// so that tests need neither etcd's Go client nor its gRPC dependencies.
type Client struct {
	url  string
	http *http.Client
}

// NewClient returns a client of the etcd at url (https://127.0.0.1:PORT)
// trusting the CA in pkiDir and authenticating with its
// HealthcheckClient certificate, as WritePKI writes them.
func NewClient(url, pkiDir string) (*Client, error) {
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, CA+".crt"))
	if err != nil {
		return nil, fmt.Errorf("reading etcd CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", filepath.Join(pkiDir, CA+".crt"))
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, HealthcheckClient+".crt"), filepath.Join(pkiDir, HealthcheckClient+".key"))
	if err != nil {
		return nil, fmt.Errorf("loading etcd client certificate: %w", err)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	return &Client{url: url, http: &http.Client{Transport: transport}}, nil
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Put sets key to value. ctx must carry a deadline.
func (c *Client) Put(ctx context.Context, key, value string) error {
	req := map[string]string{"key": b64(key), "value": b64(value)}
	if err := c.call(ctx, "/v3/kv/put", req, nil); err != nil {
		return fmt.Errorf("putting etcd key %q: %w", key, err)
	}
	return nil
}

// Get returns key's value, and whether key exists. ctx must carry a
// deadline. The read is linearizable: it goes through the leader.
func (c *Client) Get(ctx context.Context, key string) (string, bool, error) {
	var resp struct {
		KVs []struct {
			Value []byte `json:"value"` // base64 in JSON, decoded by encoding/json
		} `json:"kvs"`
	}
	if err := c.call(ctx, "/v3/kv/range", map[string]string{"key": b64(key)}, &resp); err != nil {
		return "", false, fmt.Errorf("getting etcd key %q: %w", key, err)
	}
	if len(resp.KVs) == 0 {
		return "", false, nil
	}
	return string(resp.KVs[0].Value), true, nil
}

// call POSTs req as JSON to path and decodes the answer into resp, if
// not nil.
func (c *Client) call(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("reading answer of %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: %s", path, res.Status, bytes.TrimSpace(b))
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("decoding answer of %s: %w", path, err)
	}
	return nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// probeClient asks as the kubelet's HTTP probes do, on a new connection
// each time: a connection kept from an etcd that has stopped would fail
// the first call to one that replaced it.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// Healthy asks etcd's health endpoint at url (its metrics URL and a
// /health path, as kubeadm's probes do) and returns nil when etcd answers
// 200 with "health": "true", as the probes require. ctx must carry a
// deadline.
func Healthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	b, err := io.ReadAll(res.Body)
	if err == nil {
		err = json.Unmarshal(b, &h)
	}
	if res.StatusCode != http.StatusOK || err != nil || h.Health != "true" {
		return fmt.Errorf("etcd health at %s: %s %s", url, res.Status, bytes.TrimSpace(b))
	}
	return nil
}
