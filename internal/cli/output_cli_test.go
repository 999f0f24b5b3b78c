package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestGetOutputFormats runs get with kubectl's output options against a
// status server and compares with what kubectl prints for the same
// objects.
func TestGetOutputFormats(t *testing.T) {
	socket := objectsDaemon(t, map[string]string{"/m/app.yaml": appManifest, "/m/secret.yaml": secretManifest, "/m/web.yaml": manifestOf("web")})
	cols := filepath.Join(t.TempDir(), "cols")
	if err := os.WriteFile(cols, []byte("POD NODE\n.metadata.name .spec.nodeName\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string // the whole output
		ages bool   // ages ("4s") print as AGE
	}{
		{args: []string{"get", "pods", "-o", "jsonpath={.items[*].metadata.name}"}, want: "app-n1 web-n1"},
		{args: []string{"get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.podIP}{"\n"}{end}`}, want: "app-n1\t\nweb-n1\t\n"},
		{args: []string{"get", "pods", "-o", "jsonpath", "--template", "{.kind}"}, want: "List"},
		{args: []string{"get", "pods", "-o", "jsonpath-as-json={.items[0].metadata.name}"}, want: "[\n    \"app-n1\"\n]\n"},
		{args: []string{"get", "pod", "web", "-o", "jsonpath={.kind}/{.metadata.name}"}, want: "Pod/web-n1"},
		{args: []string{"get", "pods", "-o", "name"}, want: "pod/app-n1\npod/web-n1\n"},
		{args: []string{"get", "pods", "-n", "kube-system", "-o", "name"}, want: ""},
		{args: []string{"get", "pod", "app", "-o", "name"}, want: "pod/app-n1\n"},
		{args: []string{"get", "pods", "-o", `go-template={{range .items}}{{.metadata.name}}{{"\n"}}{{end}}`}, want: "app-n1\nweb-n1\n"},
		{args: []string{"get", "pods", "--template", `{{len .items}}`}, want: "2"},
		{args: []string{"get", "pods", "-o", "template", "--template", `{{.apiVersion}}`}, want: "v1"},
		{args: []string{"get", "pods", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,IP:.status.podIP"},
			want: "NAME     NODE   IP\napp-n1   n1     <none>\nweb-n1   n1     <none>\n"},
		{args: []string{"get", "pods", "-o", "custom-columns=NAME:.metadata.name,CONTAINERS:.spec.containers[*].name", "--no-headers"},
			want: "app-n1   app\nweb-n1   app\n"},
		{args: []string{"get", "pods", "-o", "custom-columns-file=" + cols}, want: "POD      NODE\napp-n1   n1\nweb-n1   n1\n"},
		// The pods' AGE (from when the store first had them) prints as AGE,
		// and runs of spaces as one.
		{args: []string{"get", "pods", "--no-headers"}, ages: true, want: "app-n1 0/1 Pending 0 AGE\nweb-n1 0/1 Pending 0 AGE\n"},
		{args: []string{"get", "pods", "-o", "wide", "--no-headers"}, ages: true,
			want: "app-n1 0/1 Pending 0 AGE <none> n1\nweb-n1 0/1 Pending 0 AGE <none> n1\n"},
		{args: []string{"get", "configmaps", "-o", "name"}, want: "configmap/app-config\n"},
		{args: []string{"get", "cm", "app-config", "-o", `go-template={{index .data "app.conf"}}`}, want: "level=debug\nport=80\n"},
		{args: []string{"get", "secrets", "-o", "name"}, want: "secret/app-secret\n"},
		{args: []string{"get", "secret", "app-secret", "-o", "jsonpath={.kind} {.type} {.data}"}, want: "Secret Opaque "},
		{args: []string{"get", "secrets", "-o", "custom-columns=NAME:.metadata.name,KEYS:{.metadata.annotations.staticlet\\.io/keys}"},
			want: "NAME         KEYS\napp-secret   password=20,user=5\n"},
		{args: []string{"get", "manifests", "-o", "jsonpath={.kind} {.items[?(@.path==\"/m/web.yaml\")].pods[0]}"}, want: "List default/web-n1"},
		{args: []string{"get", "pods", "-o", "xml"}, code: 1,
			want: `error: unable to match a printer suitable for the output format "xml", allowed formats are: custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,name,template,templatefile,wide,yaml` + "\n"},
		{args: []string{"get", "manifests", "-o", "name"}, code: 1,
			want: `error: unable to match a printer suitable for the output format "name", allowed formats are: custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,template,templatefile,yaml` + "\n"},
		{args: []string{"get", "pods", "-o", "jsonpath={.items[*"}, code: 1, want: "error: error parsing jsonpath {.items[*, unterminated array\n"},
		{args: []string{"get", "pods", "-o", "jsonpath"}, code: 1, want: "error: template format specified but no template given\n"},
		{args: []string{"get", "pods", "-o", "custom-columns=NAME"}, code: 1,
			want: "error: unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>\n"},
	}
	for _, tc := range tests {
		out, code := runCLI(t, append(tc.args, "--status-socket", socket)...)
		if tc.ages {
			out = regexp.MustCompile(`\b\d+s\b`).ReplaceAllString(out, "AGE")
			out = regexp.MustCompile(` +`).ReplaceAllString(out, " ")
		}
		if code != tc.code || out != tc.want {
			t.Errorf("staticlet %s exited %d, printed\n%q\nwant %d,\n%q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
		if showsSecret(out) {
			t.Errorf("%v: output shows a secret value:\n%s", tc.args, out)
		}
	}
}

// TestWatchCLIOutputFormats: get events prints core/v1 Events through
// kubectl's formats; get pods -w prints each pod, then each change,
// through them.
func TestWatchCLIOutputFormats(t *testing.T) {
	w := newWaitWorld(t)
	w.serve()
	w.labelPod("a", "x", "web", v1.PodPending)
	started := time.Now()
	for range 2 {
		w.store.Event(pod.Event{Time: started, Pod: "a/x-node", Container: "c", Type: pod.EventNormal, Reason: "Started", Message: "Started container c"})
	}
	for _, tt := range []struct{ format, want string }{
		{"custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,COUNT:.count,FIELD:.involvedObject.fieldPath",
			"Normal   Started   x-node   2     spec.containers{c}\n"},
		{"name", fmt.Sprintf("event/x-node.%x\n", started.UnixNano())},
		{"jsonpath={.kind} {.items[0].kind} {.items[0].metadata.namespace} {.items[0].source.component}", "List Event a kubelet"},
	} {
		var out harness.SyncBuffer
		if err := w.runCLI(context.Background(), &out, "get", "events", "-o", tt.format, "--no-headers"); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("get events -o %s printed %q, want %q", tt.format, out.String(), tt.want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watched harness.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- w.runCLI(ctx, &watched, "get", "pods", "-w", "--output-watch-events", "-o", `jsonpath={.type} {.object.metadata.name} {.object.status.phase}{"\n"}`)
	}()
	waitFor := func(want string) {
		t.Helper()
		harness.WaitFor(t, 10*time.Second, "the watch to print "+want, func() (bool, string) {
			return watched.String() == want, watched.String()
		})
	}
	waitFor("ADDED x-node Pending\n")
	w.labelPod("a", "x", "web", v1.PodRunning)
	waitFor("ADDED x-node Pending\nMODIFIED x-node Running\n")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("get pods -w -o jsonpath after interrupt = %v, want nil", err)
	}
}
