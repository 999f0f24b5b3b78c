package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"

	"github.com/staticlet/staticlet/internal/status"
)

// TestOpenAPIV3: client-go's openapi3 root, as kubectl explain and k9s
// read it, finds the core group version and the Pod's real schema in it,
// marked with its group, version and kind.
func TestOpenAPIV3(t *testing.T) {
	api := newTestAPI(t, Config{})
	root := openapi3.NewRoot(api.clientset(t).Discovery().OpenAPIV3())
	core := schema.GroupVersion{Version: "v1"}
	doc, err := root.GVSpec(core)
	if err != nil {
		t.Fatalf("GVSpec(%v): %v", core, err)
	}
	pod, ok := doc.Components.Schemas["io.k8s.api.core.v1.Pod"]
	if !ok {
		t.Fatalf("no io.k8s.api.core.v1.Pod among the schemas of %v", core)
	}
	for _, field := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
		if _, ok := pod.Properties[field]; !ok {
			t.Errorf("the Pod schema has no property %q", field)
		}
	}
	if !hasGVK(pod.Extensions, core.WithKind("Pod")) {
		t.Errorf("the Pod schema's %s = %v, want one for v1 Pod", extensionGVK, pod.Extensions[extensionGVK])
	}
	get := doc.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"]
	if get == nil || get.Get == nil || get.Get.OperationId != "readCoreV1NamespacedPod" {
		t.Errorf("the pod's path item = %+v, want a get operation readCoreV1NamespacedPod", get)
	}
}

// TestOpenAPIEveryResource: every resource the server serves has its
// kind's schema in its group version's v3 document and in the v2 one.
// A group added to the server whose types the generated definitions lack
// fails here: add its package to internal/kubeapi/openapi's go:generate
// line.
func TestOpenAPIEveryResource(t *testing.T) {
	nodeUsage := func(context.Context, time.Duration) (status.Usage, error) { return status.Usage{}, nil }
	api := newTestAPI(t, Config{Stats: fakeStats, NodeUsage: nodeUsage})
	cs := api.clientset(t)
	root := openapi3.NewRoot(cs.Discovery().OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	v2, err := cs.Discovery().OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	models, err := proto.NewOpenAPIData(v2)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range api.srv.resources {
		gvk := res.gv.WithKind(res.kind)
		if !containsGV(gvs, res.gv) {
			t.Errorf("the /openapi/v3 index lacks %v, of %s", res.gv, res.name)
			continue
		}
		doc, err := root.GVSpec(res.gv)
		if err != nil {
			t.Fatalf("GVSpec(%v): %v", res.gv, err)
		}
		found := false
		for _, s := range doc.Components.Schemas {
			found = found || hasGVK(s.Extensions, gvk)
		}
		if !found {
			t.Errorf("no schema of %v in its OpenAPI v3 document", gvk)
		}
		name, err := api.srv.codecs.scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			t.Fatal(err)
		}
		if m := models.LookupModel(name); m == nil || !hasGVK(m.GetExtensions(), gvk) {
			t.Errorf("the OpenAPI v2 model %s = %v, want one marked %v", name, m, gvk)
		}
	}
}

// TestOpenAPIV2Explain: the v2 document, which client-go fetches as
// protobuf, walked as kubectl's v2 explain walks it: pod.spec.containers
// is an array of Container, which has an image.
func TestOpenAPIV2Explain(t *testing.T) {
	api := newTestAPI(t, Config{})
	doc, err := api.clientset(t).Discovery().OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	var s proto.Schema = models.LookupModel("io.k8s.api.core.v1.Pod")
	for _, field := range []string{"spec", "containers"} {
		kind, ok := deref(s).(*proto.Kind)
		if !ok {
			t.Fatalf("%v is no object, to find %s in", s, field)
		}
		if s, ok = kind.Fields[field]; !ok {
			t.Fatalf("%s has no field %s", kind.GetPath(), field)
		}
	}
	containers, ok := deref(s).(*proto.Array)
	if !ok {
		t.Fatalf("pod.spec.containers = %v, want an array", s)
	}
	container, ok := deref(containers.SubType).(*proto.Kind)
	if !ok || !container.IsRequired("name") || container.Fields["image"] == nil {
		t.Errorf("pod.spec.containers[] = %v, want a Container with a required name and an image", containers.SubType)
	}
}

// TestOpenAPIExplain runs kubectl's own explain on the v3 documents:
// kubectl explain pod.spec.containers.
func TestOpenAPIExplain(t *testing.T) {
	api := newTestAPI(t, Config{})
	var out bytes.Buffer
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	err := explainv2.PrintModelDescription([]string{"spec", "containers"}, &out,
		api.clientset(t).Discovery().OpenAPIV3(), gvr, false, 0, "plaintext")
	if err != nil {
		t.Fatalf("explain pod.spec.containers: %v", err)
	}
	for _, want := range []string{"KIND:       Pod", "VERSION:    v1", "FIELD: containers <[]Container>", "image\t<string>"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain pod.spec.containers lacks %q:\n%s", want, out.String())
		}
	}
}

// TestOpenAPICaching: the index names each group version's document by
// its hash; fetched by it, the document is immutable and cached for a
// year, an out-of-date hash redirects to the current one, and ETags answer
// 304, as the apiserver's do.
func TestOpenAPICaching(t *testing.T) {
	api := newTestAPI(t, Config{})
	hc, err := rest.HTTPClientFor(api.config)
	if err != nil {
		t.Fatal(err)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path, accept, etag string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, api.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	resp := get("/openapi/v3", "", "")
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&index); err != nil {
		t.Fatalf("decoding /openapi/v3: %v", err)
	}
	url := index.Paths["api/v1"].ServerRelativeURL
	hash, ok := strings.CutPrefix(url, "/openapi/v3/api/v1?hash=")
	if !ok || hash == "" {
		t.Fatalf("/openapi/v3 names api/v1 %q, want a URL with its hash", url)
	}

	resp = get(url, "application/json", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" ||
		resp.Header.Get("Etag") != strconv.Quote(hash) || resp.Header.Get("Expires") == "" {
		t.Errorf("GET %s = %s %v, want 200, immutable, with ETag %q", url, resp.Status, resp.Header, hash)
	}
	if resp := get(url, "application/json", strconv.Quote(hash)); resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET %s If-None-Match its ETag = %s, want 304", url, resp.Status)
	}
	if resp := get("/openapi/v3/api/v1?hash=stale", "", ""); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != url {
		t.Errorf("GET with a stale hash = %s to %q, want 301 to %s", resp.Status, resp.Header.Get("Location"), url)
	}
	if resp := get("/openapi/v3/apis/nope.example.com/v1", "", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET an unknown group version's document = %s, want 404", resp.Status)
	}
	resp = get(url, "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", "")
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "protobuf") || len(b) == 0 {
		t.Errorf("GET %s as protobuf = %s %q, %d bytes", url, resp.Status, resp.Header.Get("Content-Type"), len(b))
	}

	resp = get("/openapi/v2", "application/json", "")
	etag := resp.Header.Get("Etag")
	if resp.StatusCode != http.StatusOK || etag == "" {
		t.Fatalf("GET /openapi/v2 = %s with ETag %q", resp.Status, etag)
	}
	if resp := get("/openapi/v2", "application/json", etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET /openapi/v2 If-None-Match its ETag = %s, want 304", resp.Status)
	}
}

// hasGVK reports whether extensions mark a definition as of gvk. The
// v2 models, parsed from YAML, have maps keyed by any.
func hasGVK(extensions spec.Extensions, gvk schema.GroupVersionKind) bool {
	list, _ := extensions[extensionGVK].([]any)
	for _, e := range list {
		field := func(k string) any {
			switch m := e.(type) {
			case map[string]any:
				return m[k]
			case map[any]any:
				return m[k]
			}
			return nil
		}
		if field("group") == gvk.Group && field("version") == gvk.Version && field("kind") == gvk.Kind {
			return true
		}
	}
	return false
}

func containsGV(gvs []schema.GroupVersion, gv schema.GroupVersion) bool {
	for _, g := range gvs {
		if g == gv {
			return true
		}
	}
	return false
}

// deref follows a v2 model's reference to the model it names.
func deref(s proto.Schema) proto.Schema {
	if r, ok := s.(proto.Reference); ok {
		return r.SubSchema()
	}
	return s
}

// TestOpenAPIHashStable: two servers of one binary name their documents
// by the same hashes, so a restart leaves kubectl's cache valid.
func TestOpenAPIHashStable(t *testing.T) {
	var indexes []string
	for range 2 {
		api := newTestAPI(t, Config{})
		b, err := api.clientset(t).Discovery().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, string(b))
	}
	if indexes[0] != indexes[1] {
		t.Errorf("two servers' /openapi/v3 differ:\n%s\n%s", indexes[0], indexes[1])
	}
}

// TestOpenAPILeavesOutUndefined: a resource whose kind has no generated
// definition is left out of the documents, the others stay.
func TestOpenAPILeavesOutUndefined(t *testing.T) {
	srv := New(Config{Store: status.NewStore(), NodeName: "node1"})
	defined := generatedDefinitions()
	delete(defined, "io.k8s.api.core.v1.Secret")
	ops, err := srv.operations(schema.GroupVersion{Version: "v1"}, defined)
	if err != nil {
		t.Fatal(err)
	}
	var pods bool
	for _, op := range ops {
		if strings.Contains(op.path, "/secrets") {
			t.Errorf("operation %s on %s, of a kind with no definition", op.id, op.path)
		}
		pods = pods || op.id == "listCoreV1PodForAllNamespaces"
	}
	if !pods {
		t.Errorf("the pods' operations are gone with the secrets'")
	}
}

func TestOperationID(t *testing.T) {
	tests := []struct {
		word, group, version, kind, sub string
		namespaced, all                 bool
		want                            string
	}{
		{"read", "", "v1", "Pod", "", true, false, "readCoreV1NamespacedPod"},
		{"list", "", "v1", "Pod", "", true, true, "listCoreV1PodForAllNamespaces"},
		{"list", "", "v1", "Node", "", false, false, "listCoreV1Node"},
		{"read", "", "v1", "Pod", "log", true, false, "readCoreV1NamespacedPodLog"},
		{"list", "events.k8s.io", "v1", "Event", "", true, true, "listEventsV1EventForAllNamespaces"},
		{"create", "authorization.k8s.io", "v1", "SelfSubjectAccessReview", "", false, false, "createAuthorizationV1SelfSubjectAccessReview"},
		{"read", "metrics.k8s.io", "v1beta1", "NodeMetrics", "", false, false, "readMetricsV1beta1NodeMetrics"},
	}
	for _, tt := range tests {
		gv := schema.GroupVersion{Group: tt.group, Version: tt.version}
		if got := operationID(tt.word, gv, tt.kind, tt.sub, tt.namespaced, tt.all); got != tt.want {
			t.Errorf("operationID(%q, %v, %q, %q, %v, %v) = %q, want %q", tt.word, gv, tt.kind, tt.sub, tt.namespaced, tt.all, got, tt.want)
		}
	}
}
