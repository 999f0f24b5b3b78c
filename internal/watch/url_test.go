package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// manifestServer serves one body the way a web server serves a file: with
// an ETag and/or Last-Modified when asked to, answering conditional
// requests with 304. It counts what it sends.
type manifestServer struct {
	mu           sync.Mutex
	body         string
	status       int  // when not 0, every request gets this status
	etag         bool // send an ETag and honour If-None-Match
	lastModified bool // send Last-Modified and honour If-Modified-Since
	delay        time.Duration
	requests     int
	notModified  int
	bodies       int // 200s with a body
	header       http.Header
}

var modTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func (m *manifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.requests++
	m.header = r.Header.Clone()
	body, status, delay := m.body, m.status, m.delay
	sum := sha256.Sum256([]byte(body))
	tag := `"` + hex.EncodeToString(sum[:8]) + `"`
	m.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 {
		http.Error(w, "the server says no", status)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etag {
		w.Header().Set("ETag", tag)
		if r.Header.Get("If-None-Match") == tag {
			m.notModified++
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if m.lastModified {
		// The body's "modification time" moves with its content.
		mt := modTime.Add(time.Duration(sum[0]) * time.Hour)
		w.Header().Set("Last-Modified", mt.Format(http.TimeFormat))
		if !m.etag && r.Header.Get("If-Modified-Since") == mt.Format(http.TimeFormat) {
			m.notModified++
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	m.bodies++
	io.WriteString(w, body)
}

func (m *manifestServer) set(f func(m *manifestServer)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

func (m *manifestServer) counts() (requests, notModified, bodies int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests, m.notModified, m.bodies
}

func (m *manifestServer) lastHeader() http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.header
}

// newURLSource returns a URL source on srv polling every period.
func newURLSource(t *testing.T, srvURL string, period time.Duration, mod func(*URLConfig)) *URL {
	t.Helper()
	cfg := URLConfig{URL: srvURL, Period: period, Timeout: 2 * time.Second, Decode: fakeDecode}
	if mod != nil {
		mod(&cfg)
	}
	u, err := NewURL(cfg)
	if err != nil {
		t.Fatalf("NewURL(%q) = %v", srvURL, err)
	}
	return u
}

// waitSnap waits for a snapshot of r whose summary contains want.
func waitSnap(t *testing.T, r *running, want string) Snapshot {
	t.Helper()
	var last Snapshot
	if !waitFor(t, 10*time.Second, func() bool {
		var ok bool
		last, ok = r.latest()
		return ok && strings.Contains(urlSummary(last), want)
	}) {
		t.Fatalf("no snapshot with %q; last: %q", want, urlSummary(last))
	}
	return last
}

// urlSummary is summary for a URL source's snapshot: "pods !error".
func urlSummary(s Snapshot) string {
	if len(s.Files) != 1 {
		return fmt.Sprintf("%d results", len(s.Files))
	}
	return strings.TrimPrefix(fileSummary(s.Files[0]), filepath.Base(s.Files[0].Path)+": ")
}

// TestURLConditional checks that an unchanged source costs 304s and sends
// nothing, with ETag and with Last-Modified alone, and that a change comes
// through.
func TestURLConditional(t *testing.T) {
	for _, tc := range []struct {
		name         string
		etag, lastMo bool
	}{
		{"etag", true, false},
		{"last-modified", false, true},
		{"both", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := &manifestServer{body: "name: a", etag: tc.etag, lastModified: tc.lastMo}
			srv := httptest.NewServer(ms)
			defer srv.Close()
			r := start(t, newURLSource(t, srv.URL, 10*time.Millisecond, nil))
			waitSnap(t, r, "default/a")
			if !waitFor(t, 10*time.Second, func() bool { _, n, _ := ms.counts(); return n >= 10 }) {
				t.Fatalf("fewer than 10 conditional polls answered 304")
			}
			if req, n, bodies := ms.counts(); bodies != 1 || n < req-2 {
				t.Errorf("after %d requests: %d bodies sent and %d 304s, want 1 body and the rest 304", req, bodies, n)
			}
			if got := len(r.all()); got != 1 {
				t.Errorf("%d snapshots sent for an unchanged source, want 1", got)
			}
			ms.set(func(m *manifestServer) { m.body = "name: b" })
			waitSnap(t, r, "default/b")
			if got := len(r.all()); got != 2 {
				t.Errorf("%d snapshots after one change, want 2", got)
			}
		})
	}
}

// TestURLSameBodyWithoutValidators checks that a server that cannot answer
// conditional requests costs a download but no snapshot and no decoding.
func TestURLSameBodyWithoutValidators(t *testing.T) {
	ms := &manifestServer{body: "name: a"}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	var dec countingDecoder
	r := start(t, newURLSource(t, srv.URL, 10*time.Millisecond, func(c *URLConfig) { c.Decode = dec.decode }))
	waitSnap(t, r, "default/a")
	waitFor(t, 10*time.Second, func() bool { _, _, b := ms.counts(); return b >= 5 })
	if n := dec.calls.Load(); n != 1 {
		t.Errorf("decoded %d times, want 1", n)
	}
	if got := len(r.all()); got != 1 {
		t.Errorf("%d snapshots, want 1", got)
	}
	if h := ms.lastHeader(); h.Get("If-None-Match") != "" || h.Get("If-Modified-Since") != "" {
		t.Errorf("conditional headers sent without validators: %v", h)
	}
}

// TestURLFailuresKeepPods makes every kind of failed fetch after a good one
// and checks that the pods stay, the error shows with the time of the last
// success, and a recovery clears it.
func TestURLFailuresKeepPods(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  func(m *manifestServer)
		close bool // stop the server instead
		want  string
	}{
		{"server error", func(m *manifestServer) { m.status = 503 }, false, "503 Service Unavailable: the server says no"},
		{"not found", func(m *manifestServer) { m.status = 404 }, false, "404 Not Found"},
		{"forbidden", func(m *manifestServer) { m.status = 403 }, false, "403"},
		{"undecodable", func(m *manifestServer) { m.body = "bad" }, false, "bad manifest"},
		{"empty body", func(m *manifestServer) { m.body = "" }, false, "empty response body"},
		{"blank body", func(m *manifestServer) { m.body = " \n\n" }, false, "empty response body"},
		{"too large", func(m *manifestServer) { m.body = strings.Repeat("name: x\n", 100) }, false, "over the 500-byte limit"},
		{"timeout", func(m *manifestServer) { m.delay = time.Minute }, false, "imeout"},
		{"connection refused", nil, true, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := &manifestServer{body: "name: a\nname: b", etag: true}
			srv := httptest.NewUnstartedServer(ms)
			// A fixed address, so the server can come back on it.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv.Listener = l
			srv.Start()
			defer func() { srv.Close() }()
			addr := l.Addr().String()
			u := newURLSource(t, srv.URL, 20*time.Millisecond, func(c *URLConfig) {
				c.MaxSize = 500
				c.Timeout = 200 * time.Millisecond
			})
			r := start(t, u)
			good := waitSnap(t, r, "default/a,default/b")
			if good.Files[0].Err != nil || !good.Files[0].LastSuccess.IsZero() {
				t.Errorf("good result = %+v, want no error and no LastSuccess", good.Files[0])
			}
			before := time.Now()
			if tc.close {
				srv.Close()
			} else {
				ms.set(tc.fail)
			}
			bad := waitSnap(t, r, tc.want)
			f := bad.Files[0]
			if got := urlSummary(bad); !strings.HasPrefix(got, "default/a,default/b !") {
				t.Errorf("after the failure: %q, want the pods kept with the error", got)
			}
			if f.LastSuccess.IsZero() || f.LastSuccess.After(before) {
				t.Errorf("LastSuccess = %v, want the last good poll, before %v", f.LastSuccess, before)
			}
			n := len(r.all())
			time.Sleep(100 * time.Millisecond) // several polls failing the same way
			if got := len(r.all()); got != n {
				t.Errorf("%d snapshots sent while failing the same way, want none", got-n)
			}

			// Recovery: a new body applies.
			if tc.close {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("listening again on %s: %v", addr, err)
				}
				srv = httptest.NewUnstartedServer(ms)
				srv.Listener = l
				srv.Start()
			}
			ms.set(func(m *manifestServer) { m.status, m.delay, m.body = 0, 0, "name: c" })
			if s := waitSnap(t, r, "default/c"); s.Files[0].Err != nil || !s.Files[0].LastSuccess.IsZero() {
				t.Errorf("after recovery: %+v, want no error", s.Files[0])
			}
		})
	}
}

// TestURLFirstPollFails checks that a failing first poll still sends a
// snapshot (the source has been read once), with no pods.
func TestURLFirstPollFails(t *testing.T) {
	ms := &manifestServer{status: 500}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	r := start(t, newURLSource(t, srv.URL, time.Hour, nil))
	s := waitSnap(t, r, "500")
	if f := s.Files[0]; len(f.Pods) != 0 || !f.LastSuccess.IsZero() || f.Path != srv.URL || s.Source != "url:"+srv.URL {
		t.Errorf("first snapshot = %+v, want %s with an error, no pods, no last success", s, srv.URL)
	}
}

// TestURLRealDecoder serves real manifests: a Pod, several documents, and an
// empty PodList, which removes every pod, unlike an empty body.
func TestURLRealDecoder(t *testing.T) {
	const podYAML = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	ms := &manifestServer{body: fmt.Sprintf(podYAML, "one"), etag: true}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	decode := func(path string, data []byte) (*pod.Manifest, error) {
		return pod.DecodeFile(path, data, pod.Options{NodeName: "n1", SourceKind: pod.SourceHTTP, Seen: time.Now(), AllowEmptyList: true})
	}
	r := start(t, newURLSource(t, srv.URL, 10*time.Millisecond, func(c *URLConfig) { c.Decode = decode }))
	s := waitSnap(t, r, "default/one-n1")
	if p := s.Files[0].Pods[0]; p.Source != srv.URL || p.Annotations[pod.AnnotationSource] != pod.SourceHTTP {
		t.Errorf("pod source %q, annotation %q; want %q, %q", p.Source, p.Annotations[pod.AnnotationSource], srv.URL, pod.SourceHTTP)
	}
	ms.set(func(m *manifestServer) {
		m.body = fmt.Sprintf(podYAML, "one") + "---\n" + fmt.Sprintf(podYAML, "two")
	})
	waitSnap(t, r, "default/one-n1,default/two-n1")
	ms.set(func(m *manifestServer) { m.body = "" })
	waitSnap(t, r, "default/one-n1,default/two-n1 !empty response body")
	ms.set(func(m *manifestServer) { m.body = "apiVersion: v1\nkind: PodList\nitems: []\n" })
	waitFor(t, 10*time.Second, func() bool {
		s, _ = r.latest()
		return len(s.Files[0].Pods) == 0 && s.Files[0].Err == nil
	})
	if f := s.Files[0]; len(f.Pods) != 0 || f.Err != nil {
		t.Errorf("after an empty PodList: %q, want no pods and no error", urlSummary(s))
	}
	// Comments only are no list: an error, the (no) pods kept.
	ms.set(func(m *manifestServer) { m.body = "# nothing\n" })
	waitSnap(t, r, "!")
}

// TestURLHeaders checks that the configured headers are sent and that
// their values never reach the log, also when fetching fails.
func TestURLHeaders(t *testing.T) {
	ms := &manifestServer{body: "name: a"}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	var logs lockedBuffer
	h := http.Header{}
	h.Add("Authorization", "Bearer s3cr3t-token")
	h.Add("X-Fleet", "f1eet-value")
	r := start(t, newURLSource(t, srv.URL, 10*time.Millisecond, func(c *URLConfig) {
		c.Header = h
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	waitSnap(t, r, "default/a")
	got := ms.lastHeader()
	if got.Get("Authorization") != "Bearer s3cr3t-token" || got.Get("X-Fleet") != "f1eet-value" {
		t.Errorf("server got headers %v, want Authorization and X-Fleet", got)
	}
	ms.set(func(m *manifestServer) { m.status = 401 })
	waitSnap(t, r, "401")
	ms.set(func(m *manifestServer) { m.status, m.body = 0, "bad" })
	waitSnap(t, r, "bad manifest")
	if logs.count("s3cr3t") > 0 || logs.count("f1eet") > 0 || logs.count("401") == 0 {
		logs.mu.Lock()
		t.Errorf("log leaks a header value or lacks the error:\n%s", logs.buf.String())
		logs.mu.Unlock()
	}
}

// TestURLPasswordRedacted checks that a password in the URL shows nowhere.
func TestURLPasswordRedacted(t *testing.T) {
	u, err := NewURL(URLConfig{URL: "http://user:pa55word@127.0.0.1:1/pods", Decode: fakeDecode})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(u.Name(), "pa55word") {
		t.Errorf("Name() = %q, shows the password", u.Name())
	}
	r := start(t, u)
	s := waitSnap(t, r, "!")
	if strings.Contains(s.Files[0].Path, "pa55word") || strings.Contains(s.Files[0].Err.Error(), "pa55word") {
		t.Errorf("result %q: %v shows the password", s.Files[0].Path, s.Files[0].Err)
	}
}

// TestURLTLS checks certificate verification against a CA file, and that
// without it the test server's certificate is refused.
func TestURLTLS(t *testing.T) {
	ms := &manifestServer{body: "name: a"}
	srv := httptest.NewTLSServer(ms)
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, block, 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, newURLSource(t, srv.URL, time.Hour, func(c *URLConfig) { c.CAFile = caFile }))
	waitSnap(t, r, "default/a")

	r = start(t, newURLSource(t, srv.URL, time.Hour, nil))
	waitSnap(t, r, "certificate")

	bad := filepath.Join(t.TempDir(), "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o644)
	if _, err := NewURL(URLConfig{URL: srv.URL, CAFile: bad, Decode: fakeDecode}); err == nil {
		t.Errorf("NewURL with a CA file holding no certificate succeeded")
	}
}

func TestNewURLRejects(t *testing.T) {
	for _, u := range []string{"", "ftp://x/y", "/etc/manifests", "http://", "http://[::1"} {
		if _, err := NewURL(URLConfig{URL: u, Decode: fakeDecode}); err == nil {
			t.Errorf("NewURL(%q) = nil error, want one", u)
		}
	}
}

// TestURLSizeLimitDefault checks the default limit: 10 MiB, refused also
// when the server does not announce the length.
func TestURLSizeLimitDefault(t *testing.T) {
	big := bytes.Repeat([]byte("#\n"), 5<<20+1) // 10 MiB + 2 bytes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("chunked") {
			w.Write(big[:1]) // no Content-Length: the body is streamed
			w.(http.Flusher).Flush()
			w.Write(big[1:])
			return
		}
		w.Write(big)
	}))
	defer srv.Close()
	for _, q := range []string{"", "?chunked"} {
		r := start(t, newURLSource(t, srv.URL+q, time.Hour, nil))
		waitSnap(t, r, fmt.Sprintf("%d-byte limit", 10<<20))
	}
}

// fakeTransport answers every request with a 200 and a body, recording
// when each request was made; it lets the poll timing run in a synctest
// bubble, and the fuzz test send any body, with no real connections.
type fakeTransport struct {
	mu    sync.Mutex
	times []time.Time
	// bodies are served in turn, the last one again once they run out;
	// none means "name: a". unsized sends them without a Content-Length,
	// as a streamed response.
	bodies  []string
	unsized bool
}

func (f *fakeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.times = append(f.times, time.Now())
	body := "name: a"
	if len(f.bodies) > 0 {
		body = f.bodies[min(len(f.times), len(f.bodies))-1]
	}
	size := int64(len(body))
	if f.unsized {
		size = -1
	}
	f.mu.Unlock()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", ContentLength: size,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: r,
	}, nil
}

// TestURLJitter checks in fake time that the first poll is immediate and
// that polls then come between 80% and 100% of the period apart, not all
// alike.
func TestURLJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = 10 * time.Second
		u := newURLSource(t, "http://manifests.example/pods", period, nil)
		ft := &fakeTransport{}
		u.client.Transport = ft
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		out := make(chan Snapshot, 1)
		done := make(chan error)
		go func() { done <- u.Run(ctx, out) }()
		time.Sleep(100 * period)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
		ft.mu.Lock()
		defer ft.mu.Unlock()
		if len(ft.times) < 100 || !ft.times[0].Equal(start) {
			t.Fatalf("%d polls, first at %v; want over 100, the first at once", len(ft.times), ft.times[0].Sub(start))
		}
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(ft.times); i++ {
			gap := ft.times[i].Sub(ft.times[i-1])
			distinct[gap] = true
			if gap < period*8/10 || gap > period {
				t.Errorf("poll %d came %v after the one before, want between %v and %v", i, gap, period*8/10, period)
			}
		}
		if len(distinct) < 10 {
			t.Errorf("only %d distinct gaps between %d polls: no jitter", len(distinct), len(ft.times))
		}
	})
}

// TestURLPolled checks that Polled hears of every poll with its status
// code, and of one that got no response with 0, with the URL's password
// redacted.
func TestURLPolled(t *testing.T) {
	ms := &manifestServer{body: "name: a", etag: true}
	srv := httptest.NewServer(ms)
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		urls  = map[string]bool{}
	)
	polled := func(u string, code int) {
		mu.Lock()
		defer mu.Unlock()
		codes[code]++
		urls[u] = true
	}
	seen := func(code int) bool {
		mu.Lock()
		defer mu.Unlock()
		return codes[code] > 0
	}
	withPassword := strings.Replace(srv.URL, "://", "://user:secret@", 1)
	start(t, newURLSource(t, withPassword, 10*time.Millisecond, func(c *URLConfig) { c.Polled = polled }))
	for _, code := range []int{200, 304} {
		if !waitFor(t, 10*time.Second, func() bool { return seen(code) }) {
			t.Fatalf("Polled never told of a %d", code)
		}
	}
	ms.set(func(m *manifestServer) { m.status = 503 })
	if !waitFor(t, 10*time.Second, func() bool { return seen(503) }) {
		t.Fatalf("Polled never told of a 503")
	}
	srv.Close()
	if !waitFor(t, 10*time.Second, func() bool { return seen(0) }) {
		t.Fatalf("Polled never told of a poll without a response (code 0)")
	}
	mu.Lock()
	defer mu.Unlock()
	for u := range urls {
		if strings.Contains(u, "secret") {
			t.Errorf("Polled got URL %q, want the password redacted", u)
		}
	}
}

// TestURLRereadsSecretSources: a served Secret that fills a key from a
// file of the node is decoded again at every poll, though the server
// answers 304: a new value of the file is seen, an unreadable one is an
// error that clears once it is readable again, and a poll that finds
// nothing new sends no snapshot.
func TestURLRereadsSecretSources(t *testing.T) {
	key := filepath.Join(t.TempDir(), "tls.key")
	writeKey := func(v string) {
		t.Helper()
		if err := os.WriteFile(key, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKey("one")
	ms := &manifestServer{etag: true,
		body: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n  annotations: {staticlet.io/secret-files: tls.key=" + key + "}\n"}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	decode := func(path string, data []byte) (*pod.Manifest, error) {
		return pod.DecodeFile(path, data, pod.Options{NodeName: "n1", SourceKind: pod.SourceHTTP, ReadData: func(src pod.DataSource) ([]byte, error) {
			return os.ReadFile(src.Name)
		}})
	}
	r := start(t, newURLSource(t, srv.URL, 10*time.Millisecond, func(c *URLConfig) { c.Decode = decode }))
	// waitKey waits for a snapshot whose Secret holds v, in error or not.
	waitKey := func(v string, failing bool) {
		t.Helper()
		var got string
		var gotErr error
		if !waitFor(t, 10*time.Second, func() bool {
			s, ok := r.latest()
			if !ok || len(s.Files) != 1 || len(s.Files[0].Objects) != 1 {
				return false
			}
			got, gotErr = string(s.Files[0].Objects[0].Secret.Data["tls.key"]), s.Files[0].Err
			return got == v && (gotErr != nil) == failing
		}) {
			t.Fatalf("tls.key = %q, error %v; want %q, in error %v", got, gotErr, v, failing)
		}
	}
	waitKey("one", false)
	if !waitFor(t, 10*time.Second, func() bool { _, n, _ := ms.counts(); return n >= 5 }) {
		t.Fatalf("fewer than 5 polls answered 304")
	}
	if n := len(r.all()); n != 1 {
		t.Errorf("%d snapshots while nothing changed, want 1", n)
	}
	writeKey("two")
	waitKey("two", false)
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	waitKey("two", true)
	writeKey("three")
	waitKey("three", false)
	if _, _, bodies := ms.counts(); bodies != 1 {
		t.Errorf("the server sent %d bodies, want 1: the body never changed", bodies)
	}
}
