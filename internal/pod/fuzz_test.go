package pod

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// seedFiles are the manifests FuzzDecode starts from besides decodeCases:
// the real ones in testdata/corpus (a copy of the corpus beside the
// repository, see its SOURCES.md) and the repository's examples.
var seedFiles = []string{"testdata/corpus/*.yaml", "../../manifests/*.yaml"}

// FuzzDecode checks what Decode promises for any input: it returns pods or
// an error, never both nor neither (an empty list aside, when allowed), and
// never panics; every error names the file; the same input gives the same
// result; and a pod it returns, written out again as JSON or YAML with its
// name as given, decodes to the same pod.
func FuzzDecode(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.data, false)
	}
	f.Add("apiVersion: v1\nkind: PodList\nitems: []\n", true)
	n := 0
	for _, pattern := range seedFiles {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(data), false)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no seed manifests in %q", seedFiles)
	}
	f.Fuzz(func(t *testing.T, data string, allowEmpty bool) {
		opts := testOpts
		if allowEmpty {
			opts.SourceKind, opts.AllowEmptyList = SourceHTTP, true
		}
		pods, err := Decode(fuzzFile, []byte(data), opts)
		checkDecoded(t, data, opts, pods, err)
		again, err2 := Decode(fuzzFile, []byte(data), opts)
		if got, want := render(t, again, err2), render(t, pods, err); got != want {
			t.Fatalf("Decode is not deterministic: first\n%s\nthen\n%s", want, got)
		}
		for _, p := range pods {
			checkRoundTrip(t, p, opts)
		}
	})
}

const fuzzFile = "fuzz.yaml"

// checkDecoded checks one result of Decode against the contract.
func checkDecoded(t *testing.T, data string, opts Options, pods []*Pod, err error) {
	t.Helper()
	if err != nil {
		if pods != nil {
			t.Fatalf("Decode = %d pods and error %v, want one or the other", len(pods), err)
		}
		var list ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("Decode error %v (%T), want a non-empty ErrorList", err, err)
		}
		lines := yamlLines(data)
		for _, e := range list {
			if e.File != fuzzFile || e.Msg == "" || e.Line < 0 || e.Line > lines {
				t.Errorf("error %+v: want file %q, a message and a line in [0, %d]", *e, fuzzFile, lines)
			}
		}
		if !strings.HasPrefix(err.Error(), fuzzFile) {
			t.Errorf("error %q does not start with the file name", err)
		}
		return
	}
	if len(pods) == 0 && !opts.AllowEmptyList {
		t.Fatalf("Decode = no pods and no error")
	}
	suffix := "-" + strings.ToLower(opts.NodeName)
	keys := map[Key]bool{}
	for _, p := range pods {
		if p.Source != fuzzFile || !strings.HasSuffix(p.Name, suffix) || p.Namespace == "" || p.UID == "" ||
			p.Annotations[AnnotationHash] != string(p.UID) || p.Spec.NodeName != opts.NodeName || len(p.SandboxHash) != 16 {
			t.Errorf("pod %s: identity not set: source %q, uid %q, hash annotation %q, node %q, sandbox hash %q",
				p, p.Source, p.UID, p.Annotations[AnnotationHash], p.Spec.NodeName, p.SandboxHash)
		}
		if keys[p.Key()] {
			t.Errorf("pod %s returned twice", p)
		}
		keys[p.Key()] = true
	}
}

// yamlLines counts the lines of data as YAML does: a line ends at \n, \r,
// \r\n and the Unicode line breaks NEL, LS and PS, so that "\r0" has two.
func yamlLines(data string) int {
	data = strings.ReplaceAll(data, "\r\n", "\n")
	n := 1
	for _, r := range data {
		switch r {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

// checkRoundTrip writes p out as a manifest, JSON and YAML, with its name as
// the manifest gave it, and checks that each decodes to the same pod: the
// defaults, the identity and validation accept their own output.
func checkRoundTrip(t *testing.T, p *Pod, opts Options) {
	t.Helper()
	m := p.Pod.DeepCopy()
	m.Name = strings.TrimSuffix(m.Name, "-"+strings.ToLower(opts.NodeName))
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("encoding pod %s: %v", p, err)
	}
	ys, err := sigsyaml.Marshal(m)
	if err != nil {
		t.Fatalf("encoding pod %s as YAML: %v", p, err)
	}
	want := render(t, []*Pod{p}, nil)
	for _, enc := range [][]byte{js, ys} {
		again, err := Decode(fuzzFile, enc, opts)
		if got := render(t, again, err); got != want {
			t.Fatalf("pod written out as\n%s\ndecodes to\n%s\nwant\n%s", enc, got, want)
		}
	}
}

// render writes a result of Decode as text, for comparing two results.
func render(t *testing.T, pods []*Pod, err error) string {
	t.Helper()
	var b bytes.Buffer
	if err != nil {
		b.WriteString("error: " + err.Error() + "\n")
	}
	for _, p := range pods {
		js, err := json.Marshal(p.Pod)
		if err != nil {
			t.Fatalf("encoding pod %s: %v", p, err)
		}
		b.WriteString(p.Source + " " + p.SandboxHash + " " + string(js) + "\n")
	}
	return b.String()
}
