package pod

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var testOpts = Options{NodeName: "Node-1", SourceKind: SourceFile, Seen: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)}

const webPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: web
    image: nginx:1.27
    ports:
    - name: http
      containerPort: 80
`

// decodeCases are the inputs for TestDecode and the seed corpus of
// FuzzDecode. wantErr lists substrings the error must contain (each line of
// an expected error as "file:line: field: msg" or a part of it); wantPods
// the full names of the pods when there is no error.
var decodeCases = []struct {
	name     string
	file     string
	data     string
	wantErr  []string
	wantPods []string
}{
	{
		name:     "one pod",
		file:     "web.yaml",
		data:     webPod,
		wantPods: []string{"web-node-1"},
	},
	{
		name:    "yaml syntax error",
		file:    "web.yaml",
		data:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   bad: indent\n",
		wantErr: []string{"web.yaml:", "invalid YAML"},
	},
	{
		name:    "yaml syntax error in second document has file line",
		file:    "two.yaml",
		data:    webPod + "---\napiVersion: v1\nkind: Pod\nmetadata: [\n",
		wantErr: []string{"two.yaml:17: invalid YAML"},
	},
	{
		name:    "yaml syntax error at the end of a file without a final newline",
		file:    "end.yaml",
		data:    "apiVersion: v1\nkind",
		wantErr: []string{"end.yaml:2: invalid YAML"},
	},
	{
		name:    "unknown field",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "    image: nginx:1.27\n", "    image: nginx:1.27\n    imagePullPolcy: Always\n", 1),
		wantErr: []string{"web.yaml:11: spec.containers[0].imagePullPolcy: unknown field"},
	},
	{
		name:    "unknown field differs in case only",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "    image:", "    Image:", 1),
		wantErr: []string{"web.yaml:10: spec.containers[0].Image: unknown field"},
	},
	{
		name:    "unknown top-level field",
		file:    "web.yaml",
		data:    webPod + "extra: 1\n",
		wantErr: []string{"web.yaml:14: extra: unknown field"},
	},
	{
		name:    "wrong type",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "containerPort: 80", `containerPort: "80"`, 1),
		wantErr: []string{`web.yaml:13: spec.containers[0].ports[0].containerPort: expected an integer, got string "80"`},
	},
	{
		name:    "number where a string belongs",
		file:    "web.yaml",
		data:    webPod + "    env:\n    - name: N\n      value: 3\n",
		wantErr: []string{"web.yaml:16: spec.containers[0].env[0].value: expected a string, got integer 3"},
	},
	{
		name:    "list where a mapping belongs",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "  labels:\n    app: web\n", "  labels:\n  - app\n", 1),
		wantErr: []string{"web.yaml:6: metadata.labels: expected a mapping, got a list"},
	},
	{
		name:    "out of range",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "containerPort: 80", "containerPort: 99999999999", 1),
		wantErr: []string{"web.yaml:13: spec.containers[0].ports[0].containerPort: 99999999999 is out of range"},
	},
	{
		name:    "bad quantity",
		file:    "web.yaml",
		data:    webPod + "    resources:\n      limits:\n        cpu: lots\n",
		wantErr: []string{"web.yaml:16: spec.containers[0].resources.limits[cpu]: invalid quantity"},
	},
	{
		name:    "duplicate field",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "    image: nginx:1.27\n", "    image: nginx:1.27\n    image: nginx:1.28\n", 1),
		wantErr: []string{"web.yaml:11: spec.containers[0].image: duplicate field"},
	},
	{
		name:    "missing image",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "    image: nginx:1.27\n", "", 1),
		wantErr: []string{"web.yaml:9: spec.containers[0].image: Required value"},
	},
	{
		name:    "empty file",
		file:    "empty.yaml",
		data:    "",
		wantErr: []string{"empty.yaml: no pods in file"},
	},
	{
		name:    "only comments and separators",
		file:    "empty.yaml",
		data:    "# nothing here\n---\n\n---\n# still nothing\n",
		wantErr: []string{"empty.yaml: no pods in file"},
	},
	{
		name:    "binary garbage",
		file:    "logo.png",
		data:    "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10",
		wantErr: []string{"logo.png:1: not UTF-8 text"},
	},
	{
		name:    "control characters",
		file:    "nul.yaml",
		data:    "apiVersion: v1\x00\x01\x02",
		wantErr: []string{"nul.yaml", "invalid YAML"},
	},
	{
		name:    "not a mapping",
		file:    "list.yaml",
		data:    "- a\n- b\n",
		wantErr: []string{"list.yaml:1: expected a Pod, PodList or List object"},
	},
	{
		name:    "wrong apiVersion",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "apiVersion: v1", "apiVersion: apps/v1", 1),
		wantErr: []string{`web.yaml:1: apiVersion: must be v1, got "apps/v1"`},
	},
	{
		name:    "wrong kind",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "kind: Pod", "kind: Deployment", 1),
		wantErr: []string{`web.yaml:2: kind: must be Pod, PodList, List, ConfigMap or Secret, got "Deployment"`},
	},
	{
		name:    "missing kind",
		file:    "web.yaml",
		data:    strings.Replace(webPod, "kind: Pod\n", "", 1),
		wantErr: []string{`web.yaml:1: kind: must be Pod, PodList, List, ConfigMap or Secret, got nothing`},
	},
	{
		name:     "json",
		file:     "web.json",
		data:     "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"Pod\",\n\t\"metadata\": {\"name\": \"web\"},\n\t\"spec\": {\"containers\": [{\"name\": \"web\", \"image\": \"nginx\"}]}\n}\n",
		wantPods: []string{"web-node-1"},
	},
	{
		name:     "json indented with tabs",
		file:     "web.json",
		data:     "\t{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n\t\"metadata\": {\"name\": \"web\"},\n\t\"spec\": {\"containers\": [{\"name\": \"web\", \"image\": \"nginx\", \"args\": [\"a\\tb\"]}]}}\n",
		wantPods: []string{"web-node-1"},
	},
	{
		name:    "json unknown field",
		file:    "web.json",
		data:    "{\n\"apiVersion\": \"v1\",\n\"kind\": \"Pod\",\n\"metadata\": {\"name\": \"web\"},\n\"spec\": {\n\"containers\": [{\"name\": \"web\", \"image\": \"nginx\", \"cmd\": [\"x\"]}]}\n}\n",
		wantErr: []string{"web.json:6: spec.containers[0].cmd: unknown field"},
	},
	{
		name:     "multiple documents",
		file:     "many.yaml",
		data:     "---\n" + webPod + "---\n\n---\n" + strings.ReplaceAll(webPod, "web", "api") + "...\n",
		wantPods: []string{"web-node-1", "api-node-1"},
	},
	{
		name:    "one bad document spoils the file",
		file:    "many.yaml",
		data:    webPod + "---\n" + strings.Replace(strings.ReplaceAll(webPod, "web", "api"), "image:", "imag:", 1),
		wantErr: []string{"many.yaml:24: spec.containers[0].imag: unknown field"},
	},
	{
		name:    "same pod twice",
		file:    "twice.yaml",
		data:    webPod + "---\n" + webPod,
		wantErr: []string{"twice.yaml:18: metadata.name: pod default/web-node-1 is defined twice in this file (first at line 4)"},
	},
	{
		name: "pod list",
		file: "list.yaml",
		data: "apiVersion: v1\nkind: PodList\nitems:\n- metadata:\n    name: a\n  spec:\n    containers:\n    - name: c\n      image: busybox\n" +
			"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: b\n  spec:\n    containers:\n    - name: c\n      image: busybox\n",
		wantPods: []string{"a-node-1", "b-node-1"},
	},
	{
		name:     "list",
		file:     "list.yaml",
		data:     "apiVersion: v1\nkind: List\nmetadata: {}\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(webPod, "\n"), "\n", "\n  ") + "\n",
		wantPods: []string{"web-node-1"},
	},
	{
		name:    "list with another kind",
		file:    "list.yaml",
		data:    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: s\n",
		wantErr: []string{`list.yaml:5: items[0].kind: must be Pod, got "Service"`},
	},
	{
		name:    "error in a list item",
		file:    "list.yaml",
		data:    "apiVersion: v1\nkind: PodList\nitems:\n- metadata:\n    name: a\n  spec:\n    containers:\n    - name: c\n",
		wantErr: []string{"list.yaml:8: items[0].spec.containers[0].image: Required value"},
	},
	{
		name: "dry-run leftovers",
		file: "dry.yaml",
		data: "apiVersion: v1\nkind: Pod\nmetadata:\n  creationTimestamp: null\n  name: web\nspec:\n  containers:\n  - image: nginx\n    name: web\n    resources: {}\n" +
			"  dnsPolicy: ClusterFirst\n  restartPolicy: Always\nstatus: {}\n",
		wantPods: []string{"web-node-1"},
	},
	{
		name:     "status content is ignored",
		file:     "status.yaml",
		data:     webPod + "status:\n  phase: Running\n  madeUp: true\n",
		wantPods: []string{"web-node-1"},
	},
	{
		name:     "anchors and merge keys",
		file:     "anchors.yaml",
		data:     "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - &c\n    name: a\n    image: busybox\n  - <<: *c\n    name: b\n",
		wantPods: []string{"web-node-1"},
	},
	{
		name:    "configMap volume without a name",
		file:    "cm.yaml",
		data:    webPod + "  volumes:\n  - name: a\n    emptyDir: {}\n  - name: b\n    hostPath:\n      path: /etc\n  - name: c\n    configMap:\n      optional: true\n",
		wantErr: []string{"cm.yaml:21: spec.volumes[2].configMap.name: Required value"},
	},
	{
		name:    "full name too long",
		file:    "long.yaml",
		data:    strings.Replace(webPod, "name: web\n  labels", "name: "+strings.Repeat("a", 250)+"\n  labels", 1),
		wantErr: []string{"long.yaml:4: metadata.name: Invalid value", "with the node name appended"},
	},
	{
		name:    "several errors, one per line",
		file:    "bad.yaml",
		data:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Bad_Name\nspec:\n  restartPolicy: Sometimes\n  containers:\n  - name: c\n",
		wantErr: []string{"bad.yaml:4: metadata.name: Invalid value: \"Bad_Name\"", "\nbad.yaml:8: spec.containers[0].image: Required value", "\nbad.yaml:6: spec.restartPolicy: Unsupported value: \"Sometimes\""},
	},
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := Decode(tc.file, []byte(tc.data), testOpts)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Decode(%q) = %d pods, want an error", tc.data, len(pods))
				}
				if pods != nil {
					t.Errorf("Decode returned %d pods with an error, want none", len(pods))
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Decode error =\n%v\nwant it to contain %q", err, want)
					}
				}
				var e *Error
				if !errors.As(err, &e) || e.File != tc.file {
					t.Errorf("errors.As(%v, *Error) = %v, want an *Error for file %q", err, e, tc.file)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				if p.Source != tc.file {
					t.Errorf("pod %s: Source = %q, want %q", p, p.Source, tc.file)
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.wantPods, ",") {
				t.Errorf("Decode pods = %v, want %v", names, tc.wantPods)
			}
		})
	}
}

func TestDecodeNeedsNodeName(t *testing.T) {
	if _, err := Decode("web.yaml", []byte(webPod), Options{}); err == nil {
		t.Error("Decode without a node name succeeded, want an error")
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&Error{File: "web.yaml", Field: "spec.containers[0].imagePullPolcy", Msg: "unknown field"}, "web.yaml: spec.containers[0].imagePullPolcy: unknown field"},
		{&Error{File: "web.yaml", Line: 12, Field: "spec", Msg: "bad"}, "web.yaml:12: spec: bad"},
		{&Error{File: "web.yaml", Msg: "no pods in file"}, "web.yaml: no pods in file"},
		{ErrorList{{File: "a", Msg: "x"}, {File: "a", Line: 2, Msg: "y"}}, "a: x\na:2: y"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestDecodeEmptyList checks AllowEmptyList: an empty PodList or List is no
// pods, while a document with nothing in it stays an error.
func TestDecodeEmptyList(t *testing.T) {
	opts := testOpts
	opts.SourceKind, opts.AllowEmptyList = SourceHTTP, true
	for _, tc := range []struct {
		data    string
		wantErr bool
	}{
		{"apiVersion: v1\nkind: PodList\nitems: []\n", false},
		{`{"apiVersion": "v1", "kind": "List", "items": []}`, false},
		{"apiVersion: v1\nkind: PodList\n", false},
		{"", true},
		{"# nothing\n---\n", true},
	} {
		pods, err := Decode("http://h/pods", []byte(tc.data), opts)
		if (err != nil) != tc.wantErr || len(pods) != 0 {
			t.Errorf("Decode(%q) with AllowEmptyList = %d pods, %v; want none and error %v", tc.data, len(pods), err, tc.wantErr)
		}
		if _, err := Decode("f.yaml", []byte(tc.data), testOpts); err == nil {
			t.Errorf("Decode(%q) without AllowEmptyList = nil error, want no pods in file", tc.data)
		}
	}
}
