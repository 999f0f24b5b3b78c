package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/cditest"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

func TestChooseDevices(t *testing.T) {
	all := []string{"k=a", "k=b", "k=c"}
	for _, tc := range []struct {
		name    string
		n       int
		holders map[string]string
		mine    []string
		want    []string
		wantErr string
	}{
		{name: "first free in order", n: 2, holders: map[string]string{"k=a": "ns/p"}, want: []string{"k=b", "k=c"}},
		{name: "its own again first", n: 1, mine: []string{"k=c"}, want: []string{"k=c"}},
		{name: "its own when held is not its own", n: 1, holders: map[string]string{"k=c": "ns/q"}, mine: []string{"k=c"}, want: []string{"k=a"}},
		{name: "too few", n: 2, holders: map[string]string{"k=a": "ns/q", "k=b": "ns/p"},
			wantErr: "1 of 3 k devices are free (held by ns/p, ns/q); 2 asked"},
		{name: "none at all", n: 1, holders: map[string]string{"k=a": "ns/p", "k=b": "ns/p", "k=c": "ns/p"},
			wantErr: "0 of 3 k devices are free (held by ns/p); 1 asked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mine := map[string]bool{}
			for _, d := range tc.mine {
				mine[d] = true
			}
			got, err := chooseDevices("k", tc.n, all, tc.holders, mine)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("chooseDevices = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("chooseDevices = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestTellFreedMerges(t *testing.T) {
	a := newDeviceAllocator(nil)
	a.tellFreed("")
	a.tellFreed("b.test/x=1,a.test/y=0")
	a.tellFreed("b.test/x=2")
	select {
	case got := <-a.freed:
		if want := []string{"a.test/y", "b.test/x"}; !slices.Equal(got, want) {
			t.Errorf("freed = %v, want %v", got, want)
		}
	default:
		t.Fatal("nothing freed")
	}
}

// deviceProbe is a script that writes to out, for each path, whether the
// container sees it and can write to it, then idles.
func deviceProbe(out string, paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "if [ ! -e %[1]s ]; then echo absent; elif echo x > %[1]s; then echo written; else echo refused; fi >> %[2]s.tmp\n", p, out)
	}
	fmt.Fprintf(&b, "mv %[1]s.tmp %[1]s\n%s", out, idleScript)
	return b.String()
}

// devicePod is a pod with one container, c, running script with the host
// directory out mounted at /out; extra is put under the pod's metadata
// and resources under the container.
func devicePod(h *harness, name, out, extra, resources string, privileged bool, script string) *pod.Pod {
	return h.decode("/m/"+name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: ns
%s
spec:
  volumes:
  - name: out
    hostPath:
      path: %s
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
    securityContext:
      privileged: %v
%s
    volumeMounts:
    - name: out
      mountPath: /out
`, name, extra, out, script, privileged, resources))
}

func TestPrivilegedSeesHostDevices(t *testing.T) {
	tier.Integration(t, "a private containerd")
	h := newHarness(t)
	name := fmt.Sprintf("staticlet-test-%d", os.Getpid())
	cditest.MknodNull(t, filepath.Join("/dev", name))
	out := t.TempDir()
	probe := func(pod string) string { return deviceProbe("/out/"+pod, "/dev/"+name) }
	priv := devicePod(h, "priv", out, "", "", true, probe("priv"))
	plain := devicePod(h, "plain", out, "", "", false, probe("plain"))
	h.start(priv, h.sandbox(priv), "c", 0)
	h.start(plain, h.sandbox(plain), "c", 0)
	waitFile(t, filepath.Join(out, "priv"), "written\n")
	waitFile(t, filepath.Join(out, "plain"), "absent\n")
}

// testVendor makes n devices of kind example.test/dev (named d0, d1, ...,
// seen in containers as /dev/exdev0, ...) on char devices made in a temp
// directory, and returns a registry of a CDI spec naming them.
func testVendor(t *testing.T, n int) *devices.Registry {
	t.Helper()
	specDir := t.TempDir()
	cditest.WriteVendor(t, specDir, "example.test/dev", "exdev", n)
	reg := devices.New(devices.Config{SpecDirs: []string{specDir}})
	if got := reg.Devices("example.test/dev"); len(got) != n {
		t.Fatalf("the test vendor's registry has devices %v, want %d", got, n)
	}
	return reg
}

func TestCDIAnnotations(t *testing.T) {
	tier.Integration(t, "a private containerd")
	reg := testVendor(t, 2)
	h := newHarnessWith(t, func(c *Config) { c.Devices = reg })
	out := t.TempDir()
	probe := func(pod string) string { return deviceProbe("/out/"+pod, "/dev/exdev0", "/dev/exdev1") }
	all := devicePod(h, "all", out, "  annotations:\n    cdi.k8s.io/test: example.test/dev=all", "", false, probe("all"))
	one := devicePod(h, "one", out, "  annotations:\n    cdi.k8s.io/test: example.test/dev=d1", "", false, probe("one"))
	none := devicePod(h, "none", out, "", "", false, probe("none"))
	for _, p := range []*pod.Pod{all, one, none} {
		if rec := h.start(p, h.sandbox(p), "c", 0); len(rec.Devices) != 0 {
			t.Errorf("container of pod %s holds %v; annotations hold nothing", p, rec.Devices)
		}
	}
	waitFile(t, filepath.Join(out, "all"), "written\nwritten\n")
	waitFile(t, filepath.Join(out, "one"), "absent\nwritten\n")
	waitFile(t, filepath.Join(out, "none"), "absent\nabsent\n")
}

func TestCDILimitsAllocation(t *testing.T) {
	tier.Integration(t, "a private containerd")
	reg := testVendor(t, 2)
	h := newHarnessWith(t, func(c *Config) { c.Devices = reg })
	out := t.TempDir()
	limits := "    resources:\n      limits:\n        example.test/dev: 1"
	probe := func(pod string) string { return deviceProbe("/out/"+pod, "/dev/exdev0", "/dev/exdev1") }
	var pods []*pod.Pod
	var sbs []pod.Record
	for _, name := range []string{"a", "b", "c"} {
		p := devicePod(h, name, out, "", limits, false, probe(name))
		pods, sbs = append(pods, p), append(sbs, h.sandbox(p))
	}
	a := h.start(pods[0], sbs[0], "c", 0)
	b := h.start(pods[1], sbs[1], "c", 0)
	if !slices.Equal(a.Devices, []string{"example.test/dev=d0"}) || !slices.Equal(b.Devices, []string{"example.test/dev=d1"}) {
		t.Fatalf("devices held: a %v, b %v; want d0 and d1", a.Devices, b.Devices)
	}
	waitFile(t, filepath.Join(out, "a"), "written\nabsent\n")
	waitFile(t, filepath.Join(out, "b"), "absent\nwritten\n")

	_, err := h.rt.StartContainer(h.ctx(), h.request(pods[2], sbs[2], "c", 0))
	var we *pod.WaitingError
	want := "0 of 2 example.test/dev devices are free (held by ns/a-n, ns/b-n); 1 asked"
	if !errors.As(err, &we) || we.Reason != "InsufficientDevices" || !strings.Contains(err.Error(), want) {
		t.Fatalf("StartContainer of a third = %v, want InsufficientDevices saying %q", err, want)
	}

	// A restart of b's container keeps its device.
	if err := h.rt.StopContainer(h.ctx(), b.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b1 := h.start(pods[1], sbs[1], "c", 1)
	if !slices.Equal(b1.Devices, []string{"example.test/dev=d1"}) {
		t.Errorf("b restarted holds %v, want d1 again", b1.Devices)
	}

	// A new Runtime, as after a restart of staticlet, finds what is held.
	rt2, err := New(h.ctx(), h.rt.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	recs, err := rt2.PodContainers(h.ctx(), pods[0].Key())
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(recs, func(r pod.Record) bool { return r.ID == a.ID }); i < 0 || !slices.Equal(recs[i].Devices, a.Devices) {
		t.Errorf("a new Runtime lists pod a's containers as %+v, want %s holding %v", recs, a.ID, a.Devices)
	}
	if _, err := rt2.StartContainer(h.ctx(), h.request(pods[2], sbs[2], "c", 0)); !errors.As(err, &we) || we.Reason != "InsufficientDevices" {
		t.Fatalf("StartContainer of a third through a new Runtime = %v, want InsufficientDevices", err)
	}

	// Removing a's container frees d0, and says so.
	if err := h.rt.RemoveContainer(h.ctx(), a.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case kinds := <-h.rt.DevicesFreed():
		if !slices.Equal(kinds, []string{"example.test/dev"}) {
			t.Errorf("DevicesFreed gave %v, want example.test/dev", kinds)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DevicesFreed told nothing after the removal")
	}
	c := h.start(pods[2], sbs[2], "c", 0)
	if !slices.Equal(c.Devices, []string{"example.test/dev=d0"}) {
		t.Errorf("c holds %v, want d0, freed by a", c.Devices)
	}
	waitFile(t, filepath.Join(out, "c"), "written\nabsent\n")
	if env := environ(t, c.Pid); !slices.Contains(env, "EXDEV0=yes") {
		t.Errorf("c's environment %v lacks its device's EXDEV0=yes", env)
	}
}

func TestCDIInitDevicesReused(t *testing.T) {
	tier.Integration(t, "a private containerd")
	reg := testVendor(t, 2)
	h := newHarnessWith(t, func(c *Config) { c.Devices = reg })
	out := t.TempDir()
	limits := "    resources:\n      limits:\n        example.test/dev: 1"
	other := devicePod(h, "other", out, "", limits, false, idleScript)
	if rec := h.start(other, h.sandbox(other), "c", 0); !slices.Equal(rec.Devices, []string{"example.test/dev=d0"}) {
		t.Fatalf("other holds %v, want d0", rec.Devices)
	}
	p := h.decode("/m/p.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ns
spec:
  initContainers:
  - name: init
    image: localhost/busybox:test
    command: [/bin/true]
%[1]s
  containers:
  - name: app
    image: localhost/busybox:test
    command: [/bin/sh, -c, %[2]q]
%[1]s
`, limits, idleScript))
	sb := h.sandbox(p)
	req := pod.ContainerRequest{Pod: p, Sandbox: sb, Container: &p.Spec.InitContainers[0], Kind: pod.KindInit}
	init, err := h.rt.StartContainer(h.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	h.removeAtEnd(init.ID)
	if !slices.Equal(init.Devices, []string{"example.test/dev=d1"}) {
		t.Fatalf("init holds %v, want d1", init.Devices)
	}
	waitFor(t, 20*time.Second, "the init container's exit", func() (bool, string) {
		recs, err := h.rt.PodContainers(h.ctx(), p.Key())
		if err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(recs, func(r pod.Record) bool { return r.ID == init.ID })
		return i >= 0 && recs[i].State == pod.TaskExited, fmt.Sprintf("containers %+v", recs)
	})
	// The finished init container's device goes to the app container.
	if app := h.start(p, sb, "app", 0); !slices.Equal(app.Devices, []string{"example.test/dev=d1"}) {
		t.Errorf("app holds %v, want d1, its init container's", app.Devices)
	}
}

// TestCDIFinishedPodFrees: the devices of a container that exited and
// will not run again (restartPolicy Never) go to the next container that
// asks, and its exit tells they are free; one that will run again
// (Always) keeps them.
func TestCDIFinishedPodFrees(t *testing.T) {
	tier.Integration(t, "a private containerd")
	reg := testVendor(t, 1)
	h := newHarnessWith(t, func(c *Config) { c.Devices = reg })
	exits := h.runExits()
	out := t.TempDir()
	limits := "    resources:\n      limits:\n        example.test/dev: 1"
	job := func(name, policy string) *pod.Pod {
		p := devicePod(h, name, out, "", limits, false, "exit 0")
		p.Spec.RestartPolicy = v1.RestartPolicy(policy)
		return p
	}
	waitExit := func(p *pod.Pod) {
		t.Helper()
		for e := nextExit(t, exits); e.Pod != p.Key() || e.OOM; e = nextExit(t, exits) {
		}
	}
	always := job("always", "Always")
	h.start(always, h.sandbox(always), "c", 0)
	waitExit(always)
	next := devicePod(h, "next", out, "", limits, false, idleScript)
	nextSb := h.sandbox(next)
	var we *pod.WaitingError
	if _, err := h.rt.StartContainer(h.ctx(), h.request(next, nextSb, "c", 0)); !errors.As(err, &we) || we.Reason != "InsufficientDevices" {
		t.Fatalf("a container that will run again gave its device away: %v", err)
	}

	never := job("never", "Never")
	ctrs, err := h.rt.PodContainers(h.ctx(), always.Key())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ctrs {
		if r.Kind != pod.KindSandbox {
			if err := h.rt.RemoveContainer(h.ctx(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	<-h.rt.DevicesFreed() // always's removal
	h.start(never, h.sandbox(never), "c", 0)
	waitExit(never)
	select {
	case kinds := <-h.rt.DevicesFreed():
		if !slices.Equal(kinds, []string{"example.test/dev"}) {
			t.Errorf("freed %v, want example.test/dev", kinds)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the exit under Never did not tell its device freed")
	}
	if rec := h.start(next, nextSb, "c", 0); !slices.Equal(rec.Devices, []string{"example.test/dev=d0"}) {
		t.Errorf("the next container holds %v, want d0, the finished pod's", rec.Devices)
	}
}
