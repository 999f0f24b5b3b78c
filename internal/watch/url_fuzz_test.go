package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// fuzzMaxSize is the body size limit of FuzzURLBody's source: small, so
// that the fuzzer reaches it.
const fuzzMaxSize = 8 << 10

// FuzzURLBody serves two bodies in turn to a URL source with the daemon's
// decoder, as a server might serve anything, and checks each snapshot
// against what the source promises: one result, for the URL without its
// password; a body that is oversized, blank or does not decode leaves the
// pods of the last good one in force with the reason, and says when that
// was; a good body's pods replace them; and a snapshot that differs from
// the one before comes with a new version, so that Run sends it.
func FuzzURLBody(f *testing.F) {
	const podYAML = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	one, two := fmt.Sprintf(podYAML, "one"), fmt.Sprintf(podYAML, "two")
	seeds := []string{
		one, one + "---\n" + two, "", " \n\n", "apiVersion: v1\nkind: PodList\nitems: []\n",
		`{"apiVersion": "v1", "kind": "List", "items": []}`, "# nothing\n", "bad",
		one + strings.Repeat("#\n", fuzzMaxSize/2),
	}
	corpus, _ := filepath.Glob("../pod/testdata/corpus/*.yaml")
	for _, p := range corpus {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	for i, s := range seeds {
		f.Add(s, seeds[(i+1)%len(seeds)], i%2 == 0)
		f.Add(s, s, i%2 == 1)
	}
	seen := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	decode := func(path string, data []byte) (*pod.Manifest, error) {
		return pod.DecodeFile(path, data, pod.Options{NodeName: "n1", SourceKind: pod.SourceHTTP, Seen: seen, AllowEmptyList: true})
	}
	f.Fuzz(func(t *testing.T, first, second string, unsized bool) {
		u, err := NewURL(URLConfig{URL: "http://user:secret@manifests.test/pods", Decode: decode, MaxSize: fuzzMaxSize})
		if err != nil {
			t.Fatal(err)
		}
		u.client.Transport = &fakeTransport{bodies: []string{first, second}, unsized: unsized}
		var (
			good     []*pod.Pod // the pods in force
			everGood bool       // some body was good
			view     string     // the last snapshot, as text
			version  urlVersion
		)
		for i, body := range []string{first, second} {
			u.poll(t.Context())
			snap := u.snapshot()
			if len(snap.Files) != 1 || snap.Source != u.Name() || snap.Err != nil {
				t.Fatalf("body %d: snapshot %+v, want one result from %s and no source error", i, snap, u.Name())
			}
			got := snap.Files[0]

			// What the body should do, judged without the source.
			var wantErr string
			switch pods, err := decode(u.url, []byte(body)); {
			case len(body) > fuzzMaxSize:
				wantErr = fmt.Sprintf("over the %d-byte limit", fuzzMaxSize)
			case strings.TrimSpace(body) == "":
				wantErr = "empty response body"
			case err != nil:
				wantErr = err.Error()
			default:
				good, everGood = pods.Pods, true
			}
			if wantErr == "" && got.Err != nil || wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), wantErr)) {
				t.Fatalf("body %d %.100q: error %v, want %q", i, body, got.Err, wantErr)
			}
			if g, w := podsText(got.Pods), podsText(good); g != w {
				t.Fatalf("body %d %.100q: pods\n%s\nwant\n%s", i, body, g, w)
			}
			if got.Err != nil && got.LastSuccess.IsZero() == everGood {
				t.Errorf("body %d: LastSuccess %v with an error, want it set only after a good body (%v)", i, got.LastSuccess, everGood)
			}
			text := fmt.Sprintf("%s %v\n%s", got.Path, got.Err, podsText(got.Pods))
			if strings.Contains(text, "secret") {
				t.Errorf("body %d: the URL's password shows in the result:\n%s", i, text)
			}
			v := u.version()
			if i > 0 && text != view && v == version {
				t.Errorf("body %d: the result changed from\n%s\nto\n%s\nbut its version did not: it would not be sent", i, view, text)
			}
			view, version = text, v
		}
	})
}

// podsText renders pods for comparison: key, UID, source and sandbox hash.
func podsText(pods []*pod.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s %s %s %s\n", p.Key(), p.UID, p.Source, p.SandboxHash)
	}
	return b.String()
}
