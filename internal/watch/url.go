package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// Defaults for URLConfig.
const (
	DefaultURLPeriod         = 20 * time.Second
	DefaultURLConnectTimeout = 5 * time.Second
	DefaultURLTimeout        = 10 * time.Second
)

// urlJitter is the share of the period by which a poll may come early: the
// wait between two polls is uniform in [(1-urlJitter)·Period, Period], so a
// fleet started at once spreads its polls out while a change is still seen
// within one period.
const urlJitter = 0.2

// URLConfig configures a URL source.
type URLConfig struct {
	// URL is where the manifests are served, http or https. Required.
	URL string
	// Header is sent with every request. Its values are never logged.
	Header http.Header
	// Period is the time between two polls (less a random jitter of up to a
	// fifth). Default DefaultURLPeriod.
	Period time.Duration
	// CAFile, if set, is a PEM file of the certificate authorities an https
	// server's certificate is verified against, instead of the system's.
	CAFile string
	// ConnectTimeout bounds the TCP connection and the TLS handshake.
	// Default DefaultURLConnectTimeout.
	ConnectTimeout time.Duration
	// Timeout bounds a whole request, body included. Default
	// DefaultURLTimeout.
	Timeout time.Duration
	// MaxSize is the largest response body accepted, in bytes; a larger one
	// is an error. Default DefaultMaxFileSize.
	MaxSize int64
	// Decode decodes a response body; it is called with the URL (its
	// password, if any, redacted) as the path. Required.
	Decode Decoder
	// CacheFile, if set, keeps the last good body across restarts: a
	// staticlet started while the URL is down runs the pods it last served
	// instead of stopping them. A body that defines a Secret is not kept:
	// a Secret's values never go to disk.
	CacheFile string
	// Polled, when set, is told of every poll's outcome from Run's
	// goroutine: the URL (password redacted) and the response's status
	// code, 0 when there was no response.
	Polled func(url string, code int)
	// Logger receives fetch errors (once each, until they change) and
	// recoveries. Default: discard.
	Logger *slog.Logger
}

// URL is the URL source: it polls a URL for manifests, the body being what
// a manifest file may hold, and sends a Snapshot with one FileResult (the
// URL) whenever the result changes. Requests are conditional (If-None-Match
// and If-Modified-Since from the last 200), so an unchanged source costs a
// 304 and sends nothing. A failed poll (no connection, a timeout, a status
// other than 200 and 304, an empty, oversized or undecodable body) never
// takes pods away: the pods of the last good body stay in force and the
// result carries the error and when the URL last served good manifests. A body
// that decodes to no pods (an empty PodList) does remove them.
type URL struct {
	cfg     URLConfig
	url     string // cfg.URL, password redacted: the path in results and the decoder's
	name    string
	client  *http.Client
	log     *slog.Logger
	running atomic.Bool

	// The fields below belong to the goroutine in Run.
	etag, modified string       // validators of the last 200
	body           servedBody   // the last 200's body
	good           pod.Manifest // what the last body that decoded defines
	bodyErr        error        // why the last body is rejected
	fetchErr       error        // why the last poll failed
	lastSuccess    time.Time    // the start of the last poll that found good manifests
	gen            uint64       // changes whenever good or bodyErr does
}

// servedBody is what a URL source keeps of the last body it was served.
type servedBody struct {
	sum  [sha256.Size]byte // its digest
	have bool              // sum, and the source's etag and modified, are set
	// again is the body in force, kept while its result may change without
	// it: its Secrets read other files (staticlet.io/secret-files or
	// secret-credentials), or it was rejected, perhaps for one of those.
	// An unchanged body is then decoded again at every poll.
	again []byte
}

// NewURL returns a URL source for cfg, with defaults filled in, or an error
// if the URL or the CA file is unusable. It starts nothing.
func NewURL(cfg URLConfig) (*URL, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("manifest URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("manifest URL %s: want an http:// or https:// URL", u.Redacted())
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultURLPeriod
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultURLConnectTimeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultURLTimeout
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxFileSize
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading manifest URL CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("manifest URL CA file %s: no PEM certificate in it", cfg.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConns:          1,
		IdleConnTimeout:       2 * cfg.Period,
		ForceAttemptHTTP2:     true,
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	redacted := u.Redacted()
	name := "url:" + redacted
	return &URL{
		cfg:    cfg,
		url:    redacted,
		name:   name,
		client: &http.Client{Transport: transport, Timeout: cfg.Timeout},
		log:    log.With("source", name),
	}, nil
}

// Name returns the source's name, "url:" and the URL (password redacted),
// as in the snapshots it sends.
func (s *URL) Name() string { return s.name }

// Run polls the URL at once and then every period (less jitter), sends the
// first snapshot (whether the poll succeeded or not) as soon as out takes
// it, then a new one whenever the result changes, never one equal to the
// previous. If the receiver is slow, only the newest snapshot waits for it.
// Run returns nil once ctx is done, after its requests have ended; it
// returns an error only when it cannot run at all.
func (s *URL) Run(ctx context.Context, out chan<- Snapshot) error {
	if s.cfg.Decode == nil {
		return fmt.Errorf("running %s: no decoder configured", s.name)
	}
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("running %s: already running", s.name)
	}
	defer s.running.Store(false)
	defer s.client.CloseIdleConnections()
	s.loadCache()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		pending *Snapshot
		pendVer urlVersion
		sentVer urlVersion
		sentAny bool
	)
	poll := func() {
		s.poll(ctx)
		if ctx.Err() != nil {
			return // a request cut short by shutdown is no result
		}
		v := s.version()
		if sentAny && v == sentVer {
			pending = nil
			return
		}
		snap := s.snapshot()
		pending, pendVer = &snap, v
	}
	poll()
	timer.Reset(s.nextDelay())
	for {
		var send chan<- Snapshot
		var next Snapshot
		if pending != nil {
			send, next = out, *pending
		}
		select {
		case <-ctx.Done():
			return nil
		case send <- next:
			sentVer, sentAny, pending = pendVer, true, nil
		case <-timer.C:
			poll()
			timer.Reset(s.nextDelay())
		}
	}
}

// nextDelay returns the wait before the next poll: the period less a random
// jitter of up to urlJitter of it.
func (s *URL) nextDelay() time.Duration {
	spread := time.Duration(float64(s.cfg.Period) * urlJitter)
	if spread <= 0 {
		return s.cfg.Period
	}
	return s.cfg.Period - rand.N(spread+1)
}

// poll makes one request and updates the source's state from its outcome.
func (s *URL) poll(ctx context.Context) {
	now := time.Now()
	body, notModified, err := s.fetch(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.failed(err)
		}
		return
	}
	s.recovered()
	defer func() {
		if s.bodyErr == nil {
			s.lastSuccess = now
		}
	}()
	sum := sha256.Sum256(body)
	if notModified || s.body.have && sum == s.body.sum {
		// The same body again (a 304, or a server without validators):
		// the decoded result still holds, and re-decoding would only
		// change its config.seen annotation; unless what it reads may
		// have changed.
		if s.body.again != nil {
			s.decode(s.body.again, true)
		}
		return
	}
	s.body.sum, s.body.have = sum, true
	s.decode(body, false)
}

// decode takes body as the URL's manifests. again says body is the one in
// force, decoded again for the files it reads: a result the same as the
// one in force (its objects holding the same data, or the same error) is
// then no change.
func (s *URL) decode(body []byte, again bool) {
	m := &pod.Manifest{}
	var err error
	if len(bytes.TrimSpace(body)) == 0 {
		err = errors.New("empty response body (to remove every pod, serve an empty PodList)")
	} else {
		m, err = s.cfg.Decode(s.url, body)
	}
	if err != nil {
		s.body.again = body
		if again && s.bodyErr != nil && s.bodyErr.Error() == err.Error() {
			return
		}
		if s.bodyErr == nil || s.bodyErr.Error() != err.Error() {
			s.log.Warn("manifests from URL rejected", "err", err, "keeping_pods", len(s.good.Pods))
		}
		s.bodyErr = err
		s.gen++
		return
	}
	s.body.again = nil
	if m.ReadsFiles() {
		s.body.again = body
	}
	if again && s.bodyErr == nil && sameObjects(s.good.Objects, m.Objects) {
		return
	}
	if s.bodyErr != nil {
		s.log.Info("manifests from URL accepted again", "pods", len(m.Pods))
	}
	s.good, s.bodyErr = *m, nil
	s.gen++
	s.saveCache(body, hasSecrets(m))
}

// hasSecrets tells whether m defines a Secret.
func hasSecrets(m *pod.Manifest) bool {
	for _, o := range m.Objects {
		if o.Secret != nil {
			return true
		}
	}
	return false
}

// loadCache takes the body kept by an earlier run as the last good one, as
// if it had just been served, so that a first poll that fails keeps its
// pods. The first poll asks for the body again: no validators are kept.
func (s *URL) loadCache() {
	if s.cfg.CacheFile == "" {
		return
	}
	body, err := os.ReadFile(s.cfg.CacheFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("reading the manifests kept from the URL", "err", err)
		}
		return
	}
	m, err := s.cfg.Decode(s.url, body)
	if err != nil {
		s.log.Warn("manifests kept from the URL do not decode; ignoring them", "err", err)
		return
	}
	s.good, s.body.sum, s.body.have = *m, sha256.Sum256(body), true
	if fi, err := os.Stat(s.cfg.CacheFile); err == nil {
		s.lastSuccess = fi.ModTime()
	}
	s.gen++
}

// saveCache keeps a good body for the next run; a body that holds a
// Secret is not kept (a Secret's values never go to disk), and the one
// kept before goes.
func (s *URL) saveCache(body []byte, secrets bool) {
	if s.cfg.CacheFile == "" {
		return
	}
	if secrets {
		if err := os.Remove(s.cfg.CacheFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("removing the manifests kept from the URL", "err", err)
		}
		return
	}
	if err := writeAtomic(s.cfg.CacheFile, body); err != nil {
		s.log.Warn("keeping the manifests from the URL", "err", err)
	}
}

// writeAtomic replaces path with data through a rename, creating its
// directory; the file is private, as a body may hold what headers unlocked.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	// On disk before the rename: after a power cut the cache is what
	// the pods are started from.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// failed records a poll that got no usable response; the last body's result
// stays in force.
func (s *URL) failed(err error) {
	if s.fetchErr == nil || s.fetchErr.Error() != err.Error() {
		s.log.Warn("fetching manifests", "err", err, "keeping_pods", len(s.good.Pods))
	}
	s.fetchErr = err
}

// recovered records a poll that got a 200 or a 304.
func (s *URL) recovered() {
	if s.fetchErr != nil {
		s.log.Info("fetching manifests works again")
	}
	s.fetchErr = nil
}

// fetch makes one conditional GET. It returns the body of a 200, or
// notModified for a 304 to a conditional request, or an error saying what
// went wrong; a 200's validators are kept for the next request.
func (s *URL) fetch(ctx context.Context) (body []byte, notModified bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, false, fmt.Errorf("fetching %s: %w", s.url, err)
	}
	for name, values := range s.cfg.Header {
		req.Header[name] = values
	}
	conditional := false
	if s.body.have {
		if s.etag != "" {
			req.Header.Set("If-None-Match", s.etag)
			conditional = true
		}
		if s.modified != "" {
			req.Header.Set("If-Modified-Since", s.modified)
			conditional = true
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.polled(0)
		}
		// *url.Error names the method and the URL, without its password.
		return nil, false, err
	}
	defer resp.Body.Close()
	s.polled(resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusNotModified && conditional:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, true, nil
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("fetching %s: %s", s.url, statusText(resp))
	case resp.ContentLength > s.cfg.MaxSize:
		return nil, false, fmt.Errorf("fetching %s: response is %d bytes, over the %d-byte limit", s.url, resp.ContentLength, s.cfg.MaxSize)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxSize+1))
	if err != nil {
		return nil, false, fmt.Errorf("fetching %s: reading the response: %w", s.url, err)
	}
	if int64(len(body)) > s.cfg.MaxSize {
		return nil, false, fmt.Errorf("fetching %s: response is over the %d-byte limit", s.url, s.cfg.MaxSize)
	}
	s.etag, s.modified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	return body, false, nil
}

// polled reports a poll's status code (0: no response) to cfg.Polled.
func (s *URL) polled(code int) {
	if s.cfg.Polled != nil {
		s.cfg.Polled(s.url, code)
	}
}

// statusText is a response's status line for an error, with the start of
// its body when that is short text (servers often say why there).
func statusText(resp *http.Response) string {
	text := resp.Status
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if msg := strings.Join(strings.Fields(string(b)), " "); msg != "" && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		text += ": " + msg
	}
	return text
}

// snapshot returns the current view: one result, for the URL.
func (s *URL) snapshot() Snapshot {
	f := FileResult{Path: s.url, Pods: s.good.Pods, Objects: s.good.Objects, Err: s.err()}
	if f.Err != nil {
		f.LastSuccess = s.lastSuccess
	}
	return Snapshot{Source: s.name, Files: []FileResult{f}}
}

// err is the error the URL's result carries: the failed poll's, else the
// last body's.
func (s *URL) err() error {
	if s.fetchErr != nil {
		return s.fetchErr
	}
	return s.bodyErr
}

// urlVersion identifies a view for change detection. The time of the last
// success is part of a view only while an error shows (and then it does not
// move), so that a healthy, unchanged source sends nothing.
type urlVersion struct {
	gen         uint64
	err         string
	lastSuccess time.Time
}

func (s *URL) version() urlVersion {
	v := urlVersion{gen: s.gen}
	if err := s.err(); err != nil {
		v.err, v.lastSuccess = err.Error(), s.lastSuccess
	}
	return v
}
