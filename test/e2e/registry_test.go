package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// registryRepo and registryTag name the one image a testRegistry serves.
const (
	registryRepo = "test/busybox"
	registryTag  = "v1"
)

// testRegistry is a read-only registry on loopback serving the busybox test
// image as registryRepo:registryTag, with HTTP basic auth when it has a
// user. It counts the requests that resolve the tag, and can hold them.
type testRegistry struct {
	srv   *httptest.Server
	host  string // host:port
	blobs map[string][]byte
	types map[string]string // media type of each manifest, by digest
	tag   ocispec.Descriptor
	user  string
	pass  string

	// mu guards the fields below.
	mu       sync.Mutex
	resolves int           // requests for the tag's manifest
	gate     chan struct{} // when not nil, tag requests wait for it to close
}

// newTestRegistry serves the test image over plain HTTP, or over TLS with
// a certificate of its own when tls is set; user "" turns auth off.
func newTestRegistry(t *testing.T, user, pass string, tls bool) *testRegistry {
	t.Helper()
	var archive bytes.Buffer
	if err := testimage.Build(&archive, testimage.Options{}); err != nil {
		t.Fatalf("building the test image: %v", err)
	}
	r := &testRegistry{blobs: map[string][]byte{}, types: map[string]string{}, user: user, pass: pass}
	tr := tar.NewReader(&archive)
	var index ocispec.Index
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.Name == "index.json":
			if err := json.Unmarshal(b, &index); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(h.Name, "blobs/sha256/"):
			r.blobs["sha256:"+strings.TrimPrefix(h.Name, "blobs/sha256/")] = b
		}
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("test image index has %d manifests, want 1", len(index.Manifests))
	}
	r.tag = index.Manifests[0]
	r.types[r.tag.Digest.String()] = r.tag.MediaType

	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if tls {
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(strings.TrimPrefix(r.srv.URL, "http://"), "https://")
	return r
}

func (r *testRegistry) serve(w http.ResponseWriter, req *http.Request) {
	if r.user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test registry"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
	}
	if req.URL.Path == "/v2/" {
		w.Write([]byte("{}"))
		return
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/v2/"+registryRepo+"/")
	if !ok {
		http.NotFound(w, req)
		return
	}
	kind, ref, _ := strings.Cut(rest, "/")
	mediaType := "application/octet-stream"
	switch {
	case kind == "manifests" && ref == registryTag:
		r.holdResolve()
		ref, mediaType = r.tag.Digest.String(), r.tag.MediaType
	case kind == "manifests":
		mediaType = r.types[ref]
	case kind != "blobs":
		http.NotFound(w, req)
		return
	}
	b, ok := r.blobs[ref]
	if !ok || mediaType == "" {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", ref)
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	if req.Method != http.MethodHead {
		w.Write(b)
	}
}

// holdResolve counts a request for the tag and waits for the gate.
func (r *testRegistry) holdResolve() {
	r.mu.Lock()
	r.resolves++
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func (r *testRegistry) resolveCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolves
}

// image is the reference of the served image under host.
func (r *testRegistry) image(host string) string {
	return host + "/" + registryRepo + ":" + registryTag
}

// writeDockerConfig writes a config.json giving user:pass for host.
func writeDockerConfig(t *testing.T, path, host, user, pass string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	b := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// pullPod is a sleeper pod running image, pulled as policy says.
func pullPod(name, image string, policy v1.PullPolicy) string {
	return strings.Replace(harness.SleeperPod(name, "x", true),
		"    image: localhost/busybox:test\n",
		"    image: "+image+"\n    imagePullPolicy: "+string(policy)+"\n", 1)
}

// waitingFor returns a condition: the pod's container waits with one of
// reasons and a message containing one of msgs (any message when none).
func waitingFor(reasons []string, msgs ...string) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || !containsAny(w.Reason, reasons...) {
			return false
		}
		return len(msgs) == 0 || containsAny(strings.ToLower(w.Message), msgs...)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestRegistryPull pulls from a registry with basic auth using the
// credentials of --image-credentials: wrong ones leave the pod in
// ErrImagePull, then ImagePullBackOff, with the registry's reason; fixing
// the file starts it without touching the manifest.
func TestRegistryPull(t *testing.T) {
	e := harness.NewEnv(t)
	reg := newTestRegistry(t, "alice", "s3cret", false)
	creds := filepath.Join(e.Dir, "config.json")
	writeDockerConfig(t, creds, reg.host, "alice", "wrong")
	d := e.Start("--image-credentials", creds)
	image := reg.image(reg.host)
	name := "pulled-" + harness.TestNode
	e.Write("pulled.yaml", pullPod("pulled", image, v1.PullAlways))

	unauthorized := []string{"401", "unauthorized"}
	d.WaitPod(name, 60*time.Second, "ErrImagePull", waitingFor([]string{"ErrImagePull", "ImagePullBackOff"}, unauthorized...))
	p := d.WaitPod(name, 60*time.Second, "ImagePullBackOff", waitingFor([]string{"ImagePullBackOff"}, unauthorized...))
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase = %s, want Pending", p.Status.Phase)
	}
	failed := eventsOf(d, name, "Failed")
	if len(failed) == 0 || failed[0].Type != pod.EventWarning || !containsAny(strings.ToLower(failed[0].Message), unauthorized...) {
		t.Errorf("Failed events = %+v, want warnings with the registry's reason", failed)
	}
	if ev := eventsOf(d, name, "Pulling"); len(ev) < 2 || ev[0].Message != fmt.Sprintf("Pulling image %q", image) {
		t.Errorf("Pulling events = %+v, want one per attempt", ev)
	}
	if out, _ := d.CLI("get", "pods"); !strings.Contains(out, "ImagePullBackOff") && !strings.Contains(out, "ErrImagePull") {
		t.Errorf("get pods =\n%s\nwant the pull failure shown", out)
	}

	writeDockerConfig(t, creds, reg.host, "alice", "s3cret")
	d.WaitPod(name, 60*time.Second, "running once the credentials are fixed", harness.Running)
	pulled := eventsOf(d, name, "Pulled")
	if len(pulled) != 1 || !strings.HasPrefix(pulled[0].Message, fmt.Sprintf("Successfully pulled image %q in ", image)) {
		t.Errorf("Pulled events = %+v, want one success", pulled)
	}

	ctx := namespaces.WithNamespace(context.Background(), harness.TestNS)
	img, err := e.Client.ImageService().Get(ctx, image)
	if err != nil {
		t.Fatalf("pulled image record: %v", err)
	}
	if got := img.Labels[images.LabelSource]; got != images.SourcePull {
		t.Errorf("label %s of the pulled image = %q, want %q", images.LabelSource, got, images.SourcePull)
	}
}

// TestRegistryOnePullPerImage: pods wanting one image while it is being
// pulled wait for that pull instead of starting their own.
func TestRegistryOnePullPerImage(t *testing.T) {
	e := harness.NewEnv(t)
	reg := newTestRegistry(t, "alice", "s3cret", false)
	gate := make(chan struct{})
	reg.gate = gate
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release) // before the server closes: Close waits for handlers
	creds := filepath.Join(e.Dir, "config.json")
	writeDockerConfig(t, creds, reg.host, "alice", "s3cret")
	d := e.Start("--image-credentials", creds)

	names := []string{"one", "two", "three"}
	for _, n := range names {
		e.Write(n+".yaml", pullPod(n, reg.image(reg.host), v1.PullAlways))
	}
	// Each worker says Pulling just before it asks for the pull.
	harness.WaitFor(t, 60*time.Second, "every pod pulling", func() (bool, string) {
		var pulling []string
		for _, n := range names {
			if len(eventsOf(d, n+"-"+harness.TestNode, "Pulling")) > 0 {
				pulling = append(pulling, n)
			}
		}
		return len(pulling) == len(names), fmt.Sprintf("pulling: %v", pulling)
	})
	for _, n := range names {
		if p, err := d.Pod(n + "-" + harness.TestNode); err != nil || !waitingFor([]string{"ContainerCreating"})(p) {
			t.Errorf("pod %s while pulling: %v, %v; want ContainerCreating", n, describeOrNil(p), err)
		}
	}
	release()
	for _, n := range names {
		d.WaitPod(n+"-"+harness.TestNode, 60*time.Second, "running", harness.Running)
	}
	if n := reg.resolveCount(); n != 1 {
		t.Errorf("the registry resolved the tag %d times, want once for %d pods", n, len(names))
	}
}

func describeOrNil(p *v1.Pod) string {
	if p == nil {
		return "no pod"
	}
	return harness.Describe(p)
}

// TestRegistryHostsConfig: --registry-config-dir's hosts.toml sends pulls
// of a registry that does not resolve to a mirror, over plain HTTP when it
// says http, and over TLS verified with its ca file when it says https.
func TestRegistryHostsConfig(t *testing.T) {
	e := harness.NewEnv(t)
	mirror := newTestRegistry(t, "", "", false)
	tlsMirror := newTestRegistry(t, "", "", true)
	hostsDir := filepath.Join(e.Dir, "certs.d")
	writeHosts := func(registry, mirrorURL, extra string) {
		t.Helper()
		dir := filepath.Join(hostsDir, registry)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n%s", "https://"+registry, mirrorURL, extra)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeHosts("registry.invalid", "http://"+mirror.host, "")
	// tls.invalid's mirror has a certificate of a CA the system does not
	// know: pulls fail until its hosts.toml names the CA file.
	writeHosts("tls.invalid", "https://"+tlsMirror.host, "")
	caFile := filepath.Join(hostsDir, "tls.invalid", "ca.pem")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsMirror.srv.Certificate().Raw})

	d := e.Start("--registry-config-dir", hostsDir)
	e.Write("mirrored.yaml", pullPod("mirrored", mirror.image("registry.invalid"), v1.PullAlways))
	e.Write("tls.yaml", pullPod("tls", tlsMirror.image("tls.invalid"), v1.PullIfNotPresent))

	d.WaitPod("mirrored-"+harness.TestNode, 60*time.Second, "running from the mirror", harness.Running)
	if mirror.resolveCount() == 0 {
		t.Error("the mirror got no request for the tag")
	}
	d.WaitPod("tls-"+harness.TestNode, 60*time.Second, "ErrImagePull for want of the CA",
		waitingFor([]string{"ErrImagePull", "ImagePullBackOff"}, "certificate", "x509"))
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	writeHosts("tls.invalid", "https://"+tlsMirror.host, fmt.Sprintf("  ca = %q\n", caFile))
	d.WaitPod("tls-"+harness.TestNode, 60*time.Second, "running from the TLS mirror", harness.Running)
	if tlsMirror.resolveCount() == 0 {
		t.Error("the TLS mirror got no request for the tag")
	}
}
