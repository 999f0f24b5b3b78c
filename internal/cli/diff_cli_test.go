package cli

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// diffPod is a manifest of pod NAME for TestDiffCommand.
const diffPod = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  containers:
  - name: app
    image: busybox:1.36
    args: [sleep, "1000"]
`

// manifestOf returns diffPod named name.
func manifestOf(name string) string { return strings.ReplaceAll(diffPod, "NAME", name) }

// fakeDaemon serves, on a socket in a temporary directory, the status of
// a staticlet with manifest source src (a directory, or one file) that
// runs the pods of files (path -> manifest), as the daemon would report
// them; it returns the socket's path.
func fakeDaemon(t *testing.T, src string, files map[string]string) string {
	t.Helper()
	store := status.NewStore()
	var ms []status.Manifest
	for _, path := range []string{"/m/a.yaml", "/m/b.yaml"} {
		content, ok := files[path]
		if !ok {
			continue
		}
		pods, err := pod.Decode(path, []byte(content), pod.Options{NodeName: "n1", Seen: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		m := status.Manifest{Source: "dir:" + src, Path: path}
		for _, p := range pods {
			store.SetPod(p.Pod)
			m.Pods = append(m.Pods, p.Key().String())
		}
		ms = append(ms, m)
	}
	store.SetManifests(ms)
	return serveStore(t, store)
}

// serveStore serves store's status API on a socket in a temporary
// directory until the end of the test, and returns the socket's path.
func serveStore(t *testing.T, store *status.Store) string {
	t.Helper()
	return serveStatus(t, status.ServerConfig{Store: store})
}

// serveStatus serves the status API of cfg on a socket in a temporary
// directory until the end of the test, and returns the socket's path.
func serveStatus(t *testing.T, cfg status.ServerConfig) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: status.NewServer(cfg).Handler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return socket
}

// TestDiffCommand checks which running manifest a file or directory is
// compared with, and the exit codes, against a fake daemon.
func TestDiffCommand(t *testing.T) {
	running := map[string]string{"/m/a.yaml": manifestOf("a"), "/m/b.yaml": manifestOf("b")}
	changed := strings.Replace(manifestOf("a"), `"1000"`, `"1001"`, 1)
	tests := []struct {
		name  string
		src   string            // the daemon's manifest source
		files map[string]string // written under a temporary directory
		arg   string            // what to diff, under that directory
		flags []string
		code  int
		want  []string
	}{
		{name: "same file", src: "/m", files: map[string]string{"a.yaml": manifestOf("a")}, arg: "a.yaml",
			want: []string{"pod default/a-n1: nothing"}},
		{name: "edited file", src: "/m", files: map[string]string{"a.yaml": changed}, arg: "a.yaml", code: 1,
			want: []string{"pod default/a-n1: restart container app (args changed)", "+++ default/a-n1 ("}},
		{name: "another name defines the same pod", src: "/m", files: map[string]string{"x.yaml": changed}, arg: "x.yaml", code: 2,
			want: []string{`pod "default/a-n1" is also defined in /m/a.yaml`}},
		{name: "--as", src: "/m", files: map[string]string{"x.yaml": changed}, arg: "x.yaml", flags: []string{"--as", "/m/a.yaml"}, code: 1,
			want: []string{"pod default/a-n1: restart container app"}},
		{name: "new file", src: "/m", files: map[string]string{"c.yaml": manifestOf("c")}, arg: "c.yaml", code: 1,
			want: []string{"pod default/c-n1: add", "--- /dev/null"}},
		{name: "directory", src: "/m", files: map[string]string{"a.yaml": manifestOf("a"), ".a.yaml.swp": "junk"}, arg: ".",
			want: []string{"pod default/a-n1: nothing"}},
		{name: "directory pruned", src: "/m", files: map[string]string{"a.yaml": manifestOf("a")}, arg: ".", flags: []string{"--prune"}, code: 1,
			want: []string{"pod default/a-n1: nothing", "pod default/b-n1: remove", "+++ /dev/null"}},
		{name: "a pod moves to another file", src: "/m", files: map[string]string{"a.yaml": manifestOf("c"), "x.yaml": changed}, arg: ".", code: 1,
			want: []string{"pod default/a-n1: restart container app", "+++ default/a-n1 (", "x.yaml)", "pod default/c-n1: add"}},
		{name: "a new file takes a pod from an old one", src: "/m", files: map[string]string{"0.yaml": manifestOf("b")}, arg: "0.yaml", code: 2,
			want: []string{`/m/b.yaml: pod "default/b-n1" is also defined in /m/0.yaml`, "pod default/b-n1: nothing"}},
		{name: "pods that wait for each other", src: "/m", arg: ".", code: 2, files: map[string]string{
			"a.yaml": strings.Replace(manifestOf("a"), "  name: a\n", "  name: a\n  annotations: {staticlet.io/after: b}\n", 1),
			"b.yaml": strings.Replace(manifestOf("b"), "  name: b\n", "  name: b\n  annotations: {staticlet.io/after: a}\n", 1),
		}, want: []string{"a.yaml: metadata.annotations[staticlet.io/after]: the pods wait for each other in a cycle", "pod default/a-n1: remove"}},
		{name: "the daemon reads one file", src: "/m/a.yaml", files: map[string]string{"x.yaml": changed}, arg: "x.yaml", code: 1,
			want: []string{"pod default/a-n1: restart container app"}},
		{name: "invalid", src: "/m", files: map[string]string{"a.yaml": strings.Replace(changed, "args:", "argz:", 1)}, arg: "a.yaml", code: 2,
			want: []string{"a.yaml:9: spec.containers[0].argz: unknown field"}},
		{name: "no such file", src: "/m", arg: "nothing.yaml", code: 2, want: []string{"nothing.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			daemonFiles := running
			if tc.src == "/m/a.yaml" {
				daemonFiles = map[string]string{"/m/a.yaml": running["/m/a.yaml"]}
			}
			socket := fakeDaemon(t, tc.src, daemonFiles)
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := rootCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"diff", filepath.Join(dir, tc.arg), "--status-socket", socket}, tc.flags...))
			err := cmd.Execute()
			code := 0
			if err != nil {
				code = ExitCode(err)
				out.WriteString(err.Error())
			}
			if code != tc.code {
				t.Errorf("diff exited %d (%v), want %d; output:\n%s", code, err, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
