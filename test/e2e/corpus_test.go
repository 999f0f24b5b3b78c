package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// corpusDir holds real static pod manifests published by other projects,
// beside the repository.
var corpusDir = filepath.Join("..", "..", "..", "shared", "corpus", "real")

// standIn rewrites a real manifest so it runs here: every image becomes the
// local test image with a command that idles, and every hostPath moves
// under root (with what the published setup would have put there), so the
// test creates nothing in the host's /etc or /var. Everything else (args,
// env, security contexts, capabilities, priorities, host namespaces,
// probes, resources, init containers, volume types) is kept as published.
func standIn(t *testing.T, data []byte, root string) []byte {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	spec, _ := m["spec"].(map[string]any)
	for _, field := range []string{"initContainers", "containers"} {
		cs, _ := spec[field].([]any)
		for _, c := range cs {
			c := c.(map[string]any)
			// Only image and command change: the manifest's args become the
			// shell's positional parameters, and probes, env, security
			// contexts and mounts stay as published.
			c["image"] = "localhost/busybox:test"
			if field == "initContainers" {
				c["command"] = []string{"sh", "-c", "true"}
			} else {
				c["command"] = []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}
			}
		}
	}
	vols, _ := spec["volumes"].([]any)
	for _, v := range vols {
		hp, ok := v.(map[string]any)["hostPath"].(map[string]any)
		if !ok {
			continue
		}
		path := filepath.Join(root, hp["path"].(string))
		hp["path"] = path
		// What the published setup would have put there already.
		switch hp["type"] {
		case nil, "":
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		case "Directory":
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCorpusRuns runs every real manifest of the corpus, with its images
// stood in for, and checks each pod reaches Running with every container
// started as its spec says.
func TestCorpusRuns(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no corpus manifests in %s", corpusDir)
		}
		t.Skipf("no corpus manifests in %s", corpusDir)
	}
	e := harness.NewEnv(t)
	d := e.Start()
	hostRoot := filepath.Join(e.Dir, "host")
	names := map[string]string{} // pod name -> file
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		// Some corpus files define the same pod: give each its own name.
		data = standIn(t, data, filepath.Join(hostRoot, base))
		var meta struct {
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal(data, &meta); err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.Replace(string(data), "name: "+meta.Metadata.Name+"\n", "name: "+base+"\n", 1))
		ns := meta.Metadata.Namespace
		if ns == "" {
			ns = "default"
		}
		names[ns+"/"+base+"-"+harness.TestNode] = f
		e.Write(base+".yaml", string(data))
	}
	for name, f := range names {
		p := d.WaitPod(name, 60*time.Second, filepath.Base(f)+" running", harness.Running)
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.RestartCount != 0 {
				t.Errorf("%s: init container %s = %+v, want completed", filepath.Base(f), cs.Name, cs.State)
			}
		}
		if p.Spec.HostNetwork {
			pid, err := e.PidOf(p.Status.ContainerStatuses[0])
			if err != nil {
				t.Fatal(err)
			}
			if got, host := nsLink(pid, "net"), nsLink(os.Getpid(), "net"); got != host {
				t.Errorf("%s: hostNetwork pod in network namespace %s, not the host's %s", filepath.Base(f), got, host)
			}
		}
		for i, c := range p.Spec.Containers {
			if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
				continue
			}
			pid, err := e.PidOf(p.Status.ContainerStatuses[i])
			if err != nil {
				t.Fatal(err)
			}
			status, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "status"))
			for _, add := range c.SecurityContext.Capabilities.Add {
				if !hasCap(string(status), string(add)) {
					t.Errorf("%s: container %s lacks capability %s it adds", filepath.Base(f), c.Name, add)
				}
			}
		}
	}
}

func nsLink(pid int, kind string) string {
	l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
	return l
}

func itoa(i int) string { return strconv.Itoa(i) }

// capBits numbers the capabilities the corpus adds.
var capBits = map[string]int{
	"NET_ADMIN": unix.CAP_NET_ADMIN, "NET_BROADCAST": unix.CAP_NET_BROADCAST,
	"NET_RAW": unix.CAP_NET_RAW, "SYS_TIME": unix.CAP_SYS_TIME, "SYS_ADMIN": unix.CAP_SYS_ADMIN,
}

// hasCap tells whether a /proc/<pid>/status text shows capability name in
// the effective set.
func hasCap(status, name string) bool {
	bit, ok := capBits[strings.TrimPrefix(strings.ToUpper(name), "CAP_")]
	if !ok {
		return false
	}
	for _, line := range strings.Split(status, "\n") {
		if v, found := strings.CutPrefix(line, "CapEff:\t"); found {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && eff&(1<<bit) != 0
		}
	}
	return false
}
