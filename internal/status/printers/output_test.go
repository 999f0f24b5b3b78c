package printers

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// outputPods are two pods: web with an IP and two containers, db with
// neither an IP nor a label.
func outputPods() []v1.Pod {
	return []v1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx"}, {Name: "sidecar"}}, NodeName: "n1"},
			Status:     v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.88.0.5"},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "kube-system"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "etcd"}}, NodeName: "n1"},
			Status:     v1.PodStatus{Phase: v1.PodPending},
		},
	}
}

// podFormats are the formats of `get pods`.
var podFormats = Formats{Own: []string{"", "wide", "json", "yaml"}, Names: true}

// TestPrinterFormats prints pods in each of kubectl's generic formats and
// compares with what kubectl prints for the same pods.
func TestPrinterFormats(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"names.jsonpath": `{range .items[*]}{.metadata.name}{"\n"}{end}`,
		"names.tmpl":     `{{range .items}}{{.metadata.name}} {{end}}`,
		"cols.txt":       "NAME   IP\nmetadata.name   {.status.podIP}\n",
		"onecol.txt":     "NAME\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name    string
		out     Output
		single  bool // print the first pod by itself, as for `get pod NAME`
		empty   bool // print no pods
		want    string
		wantErr string
	}{
		{name: "jsonpath names", out: Output{Format: "jsonpath={.items[*].metadata.name}"}, want: "web db"},
		{name: "jsonpath of one pod", out: Output{Format: "jsonpath={.metadata.name}"}, single: true, want: "web"},
		{name: "jsonpath kind of a list", out: Output{Format: "jsonpath={.kind} {.apiVersion} {.items[0].kind} {.items[0].apiVersion}"}, want: "List v1 Pod v1"},
		{name: "jsonpath kind of one pod", out: Output{Format: "jsonpath={.kind}"}, single: true, want: "Pod"},
		{name: "jsonpath range", out: Output{Format: `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.podIP}{"\n"}{end}`, AllowMissingKeys: true}, want: "web\t10.88.0.5\ndb\t\n"},
		{name: "jsonpath filter", out: Output{Format: `jsonpath={.items[?(@.metadata.namespace=="kube-system")].metadata.name}`}, want: "db"},
		{name: "jsonpath of nothing", out: Output{Format: "jsonpath={.items[*].metadata.name}"}, empty: true, want: ""},
		{name: "jsonpath missing key allowed", out: Output{Format: "jsonpath={.metadata.nothing}", AllowMissingKeys: true}, single: true, want: ""},
		{name: "jsonpath missing key refused", out: Output{Format: "jsonpath={.metadata.nothing}"}, single: true, wantErr: "nothing is not found"},
		{name: "jsonpath from --template", out: Output{Format: "jsonpath", Template: "{.items[1].metadata.name}"}, want: "db"},
		{name: "jsonpath-file", out: Output{Format: "jsonpath-file=" + file("names.jsonpath")}, want: "web\ndb\n"},
		{name: "jsonpath-file from --template", out: Output{Format: "jsonpath-file", Template: file("names.jsonpath")}, want: "web\ndb\n"},
		{name: "jsonpath-as-json", out: Output{Format: "jsonpath-as-json={.items[*].metadata.name}"}, want: "[\n    \"web\",\n    \"db\"\n]\n"},
		{name: "jsonpath without template", out: Output{Format: "jsonpath"}, wantErr: "template format specified but no template given"},
		{name: "jsonpath that does not parse", out: Output{Format: "jsonpath={.items[*}"}, wantErr: "error parsing jsonpath {.items[*}, unterminated array"},
		{name: "jsonpath-file missing", out: Output{Format: "jsonpath-file=" + file("none")}, wantErr: "error reading --template " + file("none") + ", open " + file("none") + ": no such file or directory"},
		{name: "name", out: Output{Format: "name"}, want: "pod/web\npod/db\n"},
		{name: "name of one pod", out: Output{Format: "name"}, single: true, want: "pod/web\n"},
		{name: "name of nothing", out: Output{Format: "name"}, empty: true, want: ""},
		{name: "go-template", out: Output{Format: `go-template={{range .items}}{{.metadata.name}}{{"\n"}}{{end}}`}, want: "web\ndb\n"},
		{name: "go-template of one pod", out: Output{Format: `go-template={{.metadata.name}} {{.kind}}`}, single: true, want: "web Pod"},
		{name: "template is go-template", out: Output{Format: `template={{len .items}}`}, want: "2"},
		{name: "go-template missing key", out: Output{Format: `go-template={{.nothing}}`, AllowMissingKeys: true}, single: true, want: "<no value>"},
		{name: "go-template from --template", out: Output{Format: "go-template", Template: "{{.kind}}"}, want: "List"},
		{name: "--template alone is go-template", out: Output{Template: "{{.kind}}"}, want: "List"},
		{name: "go-template-file", out: Output{Format: "go-template-file=" + file("names.tmpl")}, want: "web db "},
		{name: "templatefile", out: Output{Format: "templatefile=" + file("names.tmpl")}, want: "web db "},
		{name: "go-template that does not parse", out: Output{Format: "go-template={{.metadata.name"}, wantErr: "error parsing template {{.metadata.name, template: output:1: unclosed action"},
		{name: "custom-columns", out: Output{Format: "custom-columns=NAME:.metadata.name,IP:.status.podIP"},
			want: "NAME   IP\nweb    10.88.0.5\ndb     <none>\n"},
		{name: "custom-columns headers as given", out: Output{Format: "custom-columns=name:metadata.name,Namespace:{.metadata.namespace}"},
			want: "name   Namespace\nweb    default\ndb     kube-system\n"},
		{name: "custom-columns without headers", out: Output{Format: "custom-columns=NAME:.metadata.name,IP:.status.podIP", NoHeaders: true},
			want: "web   10.88.0.5\ndb    <none>\n"},
		{name: "custom-columns of one pod", out: Output{Format: "custom-columns=NAME:{metadata.name}"}, single: true, want: "NAME\nweb\n"},
		{name: "custom-columns of nothing", out: Output{Format: "custom-columns=NAME:.metadata.name"}, empty: true, want: "NAME\n"},
		{name: "custom-columns with several values", out: Output{Format: "custom-columns=POD:.metadata.name,CONTAINERS:.spec.containers[*].name,APP:.metadata.labels.app"},
			want: "POD   CONTAINERS      APP\nweb   nginx,sidecar   web\ndb    etcd            <none>\n"},
		{name: "custom-columns from --template", out: Output{Format: "custom-columns", Template: "N:.metadata.name"}, want: "N\nweb\ndb\n"},
		{name: "custom-columns-file", out: Output{Format: "custom-columns-file=" + file("cols.txt"), NoHeaders: true},
			want: "NAME   IP\nweb    10.88.0.5\ndb     <none>\n"},
		{name: "custom-columns-file without specs", out: Output{Format: "custom-columns-file=" + file("onecol.txt")},
			wantErr: "invalid template, missing spec line. Expected format is one line of space separated headers, one line of space separated column specs."},
		{name: "custom-columns without columns", out: Output{Format: "custom-columns="}, wantErr: "custom-columns format specified but no custom columns given"},
		{name: "custom-columns without a path", out: Output{Format: "custom-columns=NAME"}, wantErr: "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"},
		{name: "custom-columns bad path", out: Output{Format: "custom-columns=NAME:{.metadata.name"},
			wantErr: "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'"},
		{name: "unknown format", out: Output{Format: "xml"},
			wantErr: `unable to match a printer suitable for the output format "xml", allowed formats are: custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,name,template,templatefile,wide,yaml`},
		{name: "a format with a template after another", out: Output{Format: "jsonpath={.a}", Template: "{.b}"},
			wantErr: `unable to match a printer suitable for the output format "jsonpath={.a}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := outputPods()
			if tt.empty {
				pods = nil
			}
			var b bytes.Buffer
			p, err := tt.out.Printer(podFormats)
			if err == nil && p == nil {
				t.Fatalf("Printer(%+v) = nil, want a printer", tt.out)
			}
			if err == nil && tt.single {
				err = p.Object(&b, "Pod", &pods[0])
			} else if err == nil {
				err = List(p, &b, "Pod", pods)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("printing %+v: error %v, want %q", tt.out, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("printing %+v: %v", tt.out, err)
			}
			if got := b.String(); got != tt.want {
				t.Errorf("printing %+v:\n%q\nwant\n%q", tt.out, got, tt.want)
			}
		})
	}
}

// TestPrinterOwnFormats checks that the command's own formats are left
// to it, and that -o name is refused where there are no names.
func TestPrinterOwnFormats(t *testing.T) {
	for _, o := range []Output{{}, {Format: "wide"}, {Format: "json"}, {Format: "yaml"}, {Format: "wide", NoHeaders: true}} {
		if p, err := o.Printer(podFormats); p != nil || err != nil {
			t.Errorf("Printer(%+v) = %v, %v; want nil, nil", o, p, err)
		}
	}
	docs := Formats{Own: []string{"", "json", "yaml"}}
	_, err := Output{Format: "name"}.Printer(docs)
	want := `unable to match a printer suitable for the output format "name", allowed formats are: custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,template,templatefile,yaml`
	if err == nil || err.Error() != want {
		t.Errorf("Printer(name) for documents = %v, want %q", err, want)
	}
	for _, tt := range []struct {
		out         Output
		table, wide bool
		raw         string
	}{
		{out: Output{}, table: true},
		{out: Output{Format: "wide"}, table: true, wide: true},
		{out: Output{Format: "json"}, raw: "json"},
		{out: Output{Format: "yaml"}, raw: "yaml"},
		{out: Output{Template: "{{.kind}}"}},
		{out: Output{Format: "name"}},
	} {
		table, wide := tt.out.Table()
		if table != tt.table || wide != tt.wide || tt.out.Raw() != tt.raw {
			t.Errorf("%+v: Table() = %v, %v, Raw() = %q; want %v, %v, %q", tt.out, table, wide, tt.out.Raw(), tt.table, tt.wide, tt.raw)
		}
	}
}

// TestPrinterKinds checks -o name for each kind staticlet prints, in
// kubectl's lower-case form.
func TestPrinterKinds(t *testing.T) {
	p, err := Output{Format: "name"}.Printer(podFormats)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, err := range []error{
		List(p, &b, "ConfigMap", []v1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}}}),
		List(p, &b, "Secret", []v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}}}),
		p.Object(&b, "Node", &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := "configmap/cfg\nsecret/s\nnode/n1\n"; b.String() != want {
		t.Errorf("-o name printed %q, want %q", b.String(), want)
	}
}

// TestPrinterDocuments prints what is not a Kubernetes object (manifests,
// images): an array as the items of a v1 List, an object as it is.
func TestPrinterDocuments(t *testing.T) {
	manifests := []status.Manifest{
		{Source: "dir:/m", Path: "/m/web.yaml", Pods: []string{"default/web-n1"}},
		{Source: "dir:/m", Path: "/m/bad.yaml", Error: "line 3: unknown field"},
	}
	images := &status.ImageList{Images: []status.Image{{Name: "busybox:1.36", Size: 4096}}}
	tests := []struct {
		format string
		doc    any
		want   string
	}{
		{format: "jsonpath={.kind} {.items[*].path}", doc: manifests, want: "List /m/web.yaml /m/bad.yaml"},
		{format: "custom-columns=PATH:.path,PODS:.pods[*],ERROR:.error", doc: manifests,
			want: "PATH          PODS             ERROR\n/m/web.yaml   default/web-n1   <none>\n/m/bad.yaml   <none>           line 3: unknown field\n"},
		{format: "jsonpath={.images[0].name} {.images[0].size}", doc: images, want: "busybox:1.36 4096"},
		{format: "go-template={{range .images}}{{.name}}{{end}}", doc: images, want: "busybox:1.36"},
	}
	for _, tt := range tests {
		p, err := Output{Format: tt.format}.Printer(Formats{Own: []string{"", "json", "yaml"}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := p.Document(&b, tt.doc); err != nil {
			t.Fatalf("-o %s: %v", tt.format, err)
		}
		if b.String() != tt.want {
			t.Errorf("-o %s printed %q, want %q", tt.format, b.String(), tt.want)
		}
	}
}

// TestNoHeaders checks the command's own tables with --no-headers: the
// rows alone, aligned by themselves as kubectl aligns them.
func TestNoHeaders(t *testing.T) {
	now := time.Now()
	pods := outputPods()
	w := func(b *bytes.Buffer) *bytes.Buffer { return b }
	var b bytes.Buffer
	if err := Pods(Output{NoHeaders: true}.Writer(w(&b)), pods, true, now); err != nil {
		t.Fatal(err)
	}
	want := "web   0/2   Running   0     <unknown>   10.88.0.5   n1\n" +
		"db    0/1   Pending   0     <unknown>   <none>      n1\n"
	if b.String() != want {
		t.Errorf("Pods without headers:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	if err := Pods(Output{}.Writer(&b), pods[:1], false, now); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "NAME   READY") {
		t.Errorf("Pods with headers:\n%s", b.String())
	}
	b.Reset()
	if err := Node(Output{NoHeaders: true}.Writer(&b), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, now); err != nil {
		t.Fatal(err)
	}
	if want := "n1    Unknown   <unknown>   <none>\n"; b.String() != want {
		t.Errorf("Node without headers: %q, want %q", b.String(), want)
	}
}

// TestEventWatchWithPrinter: a watch with one of kubectl's printers
// prints each event as the API's core/v1 Event, with its count so far.
func TestEventWatchWithPrinter(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	store := status.NewStore()
	store.Event(pod.Event{Time: t0, Pod: "kube-system/etcd-n1", Container: "etcd", Type: pod.EventWarning, Reason: "BackOff", Message: "Back-off\n"})
	store.Event(pod.Event{Time: t0.Add(time.Second), Object: "node/n1", Type: pod.EventNormal, Reason: "ImageGarbageCollected", Message: "Removed image x"})
	store.Event(pod.Event{Time: t0.Add(2 * time.Second), Pod: "kube-system/etcd-n1", Container: "etcd", Type: pod.EventWarning, Reason: "BackOff", Message: "Back-off\n"})
	events, _ := store.EventsAt()

	p, err := Output{Format: `jsonpath={.involvedObject.name} {.count}{"\n"}`}.Printer(Formats{Names: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	ew, err := NewEventWatch(&b, "")
	if err != nil {
		t.Fatal(err)
	}
	ew.WithPrinter(p, "n1")
	if err := ew.Print(events[:2], t0); err != nil {
		t.Fatal(err)
	}
	if err := ew.Print(events[2:], t0); err != nil {
		t.Fatal(err)
	}
	if want := "etcd-n1 1\nn1 1\netcd-n1 2\n"; b.String() != want {
		t.Errorf("EventWatch with a printer printed %q, want %q", b.String(), want)
	}
}
