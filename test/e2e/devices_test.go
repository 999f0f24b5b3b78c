package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"

	"github.com/staticlet/staticlet/internal/testutil/cditest"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// devKind is the test vendor's kind of CDI device.
const devKind = "example.test/dev"

// startWithVendor starts staticlet with a CDI spec dir holding n devices
// of devKind, seen in containers as /dev/testdev0, ...; it returns the
// daemon and the spec dir.
func startWithVendor(t *testing.T, e *harness.Env, n int) (*harness.Daemon, string) {
	t.Helper()
	specDir := t.TempDir()
	cditest.WriteVendor(t, specDir, devKind, "testdev", n)
	return e.Start("--cdi-spec-dirs", specDir), specDir
}

// devicePod is a sleeping pod's manifest: its container main runs a
// shell loop; meta goes under metadata, container under the container.
func devicePod(name, meta, container string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n" + meta + mainSleeper + container
}

// askDevices is a container's resources asking for n devices of kind.
func askDevices(kind, n string) string {
	return fmt.Sprintf("    resources:\n      limits:\n        %s: %s\n", kind, n)
}

// devicesSeen is what pod's container main sees of the test vendor: the
// /dev/testdev* nodes it has, each with "+w" when a write to it
// succeeded, and the TESTDEV* variables of its environment.
func devicesSeen(t *testing.T, d *harness.Daemon, pod string) string {
	t.Helper()
	const script = `for f in /dev/testdev*; do [ -e "$f" ] || continue; printf '%s' "$f"; echo x > "$f" && printf +w; echo; done; env | grep '^TESTDEV' | sort`
	out, errOut, code := execStaticlet(d, nil, pod, "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exec in %s: exit %d: %s", pod, code, errOut)
	}
	return strings.Join(strings.Fields(out), " ")
}

// heldDevices are the devices of pod's status, by its containers'
// allocatedResourcesStatus.
func heldDevices(p *v1.Pod) []string {
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		for _, rs := range cs.AllocatedResourcesStatus {
			for _, r := range rs.Resources {
				out = append(out, string(r.ResourceID))
			}
		}
	}
	return out
}

// TestDevicesPrivileged: a privileged container sees a device node made
// on the host under /dev after staticlet started, and can write to it;
// an unprivileged one does not see it.
func TestDevicesPrivileged(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	name := fmt.Sprintf("staticlet-e2e-%d", os.Getpid())
	cditest.MknodNull(t, filepath.Join("/dev", name))
	e.Write("priv.yaml", devicePod("priv", "", "    securityContext: {privileged: true}\n"))
	e.Write("plain.yaml", devicePod("plain", "", ""))
	for _, pod := range []string{"priv", "plain"} {
		d.WaitPod(pod+"-"+harness.TestNode, time.Minute, pod+" running", harness.Running)
	}
	check := fmt.Sprintf("if [ ! -c /dev/%[1]s ]; then echo absent; elif echo x > /dev/%[1]s; then echo written; else echo refused; fi", name)
	for pod, want := range map[string]string{"priv": "written", "plain": "absent"} {
		out, errOut, code := execStaticlet(d, nil, pod+"-"+harness.TestNode, "--", "sh", "-c", check)
		if got := strings.TrimSpace(out); code != 0 || got != want {
			t.Errorf("/dev/%s in pod %s: %q (exit %d, %s), want %s", name, pod, got, code, errOut, want)
		}
	}
}

// TestDevicesExclusive: three pods ask for one device each of a kind
// with two. Two run, each with a device of its own; the third waits,
// Pending, with the reason InsufficientDevices naming the kind and a
// Warning event. staticlet killed with SIGKILL and started again keeps
// every allocation and restarts nothing. Once one of the holders is
// removed, the third starts at once (its freed device wakes it), not
// when its backoff ends. GET /devices lists the holders throughout.
func TestDevicesExclusive(t *testing.T) {
	e := harness.NewEnv(t)
	d, specDir := startWithVendor(t, e, 2)
	for _, name := range []string{"a", "b", "c"} {
		e.Write(name+".yaml", devicePod(name, "", askDevices(devKind, "1")))
	}
	full := func(name string) string { return name + "-" + harness.TestNode }

	// Two run, one waits.
	var running []string
	var waiting string
	harness.WaitFor(t, time.Minute, "two pods running and one waiting for devices", func() (bool, string) {
		running, waiting = nil, ""
		var states []string
		for _, name := range []string{"a", "b", "c"} {
			p, err := d.Pod(full(name))
			if err != nil {
				return false, err.Error()
			}
			switch {
			case harness.Running(p):
				running = append(running, name)
			case waitingFor([]string{"InsufficientDevices"})(p) && p.Status.Phase == v1.PodPending:
				waiting = name
			}
			states = append(states, name+": "+harness.Describe(p))
		}
		return len(running) == 2 && waiting != "", strings.Join(states, "; ")
	})
	p, _ := d.Pod(full(waiting))
	msg := p.Status.ContainerStatuses[0].State.Waiting.Message
	wantMsg := fmt.Sprintf("0 of 2 %s devices are free (held by default/%s, default/%s); 1 asked", devKind, full(running[0]), full(running[1]))
	if !strings.Contains(msg, wantMsg) {
		t.Errorf("pod %s waits with message %q, want it to contain %q", waiting, msg, wantMsg)
	}
	events, err := d.Client().Events(t.Context(), "default/"+full(waiting))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(ev pod.Event) bool {
		return ev.Type == pod.EventWarning && strings.Contains(ev.Message, devKind)
	}) {
		t.Errorf("no Warning event naming %s among pod %s's events %+v", devKind, waiting, events)
	}

	// Each holder sees its own device and not the other.
	held := map[string][]string{}
	ids := map[string]string{}
	for _, name := range running {
		p, _ := d.Pod(full(name))
		held[name] = heldDevices(p)
		ids[name] = p.Status.ContainerStatuses[0].ContainerID
		if len(held[name]) != 1 {
			t.Fatalf("pod %s holds %v, want one device", name, held[name])
		}
		i := strings.TrimPrefix(held[name][0], devKind+"=d")
		want := fmt.Sprintf("/dev/testdev%s+w TESTDEV%s=yes", i, i)
		if got := devicesSeen(t, d, full(name)); got != want {
			t.Errorf("pod %s, holding %s, sees %q, want %q", name, held[name][0], got, want)
		}
	}
	if held[running[0]][0] == held[running[1]][0] {
		t.Errorf("pods %s and %s hold the same device %s", running[0], running[1], held[running[0]][0])
	}

	wantDevices := map[string]string{}
	for _, name := range running {
		wantDevices[held[name][0]] = "allocated default/" + full(name) + "/main"
	}
	devicesListed(t, d, wantDevices)

	// A crash and a restart of staticlet change nothing.
	d.Kill()
	d = e.Start("--cdi-spec-dirs", specDir)
	for _, name := range running {
		p := d.WaitPod(full(name), 30*time.Second, name+" running again", harness.Running)
		cs := p.Status.ContainerStatuses[0]
		if cs.ContainerID != ids[name] || cs.RestartCount != 0 || !slices.Equal(heldDevices(p), held[name]) {
			t.Errorf("after the restart of staticlet, pod %s has container %s (restarts %d) holding %v; want %s (0) holding %v",
				name, cs.ContainerID, cs.RestartCount, heldDevices(p), ids[name], held[name])
		}
	}
	d.WaitPod(full(waiting), 30*time.Second, waiting+" waiting again", waitingFor([]string{"InsufficientDevices"}))
	devicesListed(t, d, wantDevices)

	// Removing a holder lets the third start, once its retries have
	// backed off to seconds apart: the freed device wakes it.
	var due time.Time
	harness.WaitFor(t, 30*time.Second, "the retries of "+waiting+" backing off to 3s", func() (bool, string) {
		due = nextRetry(t, d.Out.String(), "default/"+full(waiting))
		return time.Until(due) > 3*time.Second, "next retry at " + due.String()
	})
	gone := running[0]
	e.Remove(gone + ".yaml")
	removed := time.Now()
	harness.WaitFor(t, 30*time.Second, gone+" removed", func() (bool, string) {
		_, err := d.Pod(full(gone))
		return err != nil, "still listed"
	})
	stopped := time.Now()
	p = d.WaitPod(full(waiting), 30*time.Second, waiting+" running", harness.Running)
	started := time.Now()
	t.Logf("pod %s removed in %s; pod %s running %s later, %s before its backoff ended",
		gone, stopped.Sub(removed).Round(time.Millisecond), waiting, started.Sub(stopped).Round(time.Millisecond), due.Sub(started).Round(time.Millisecond))
	if started.After(due) {
		t.Errorf("pod %s started at %s, after its backoff ended (%s): the freed device did not wake it", waiting, started, due)
	}
	if got := heldDevices(p); !slices.Equal(got, held[gone]) {
		t.Errorf("pod %s holds %v, want %v, which %s held", waiting, got, held[gone], gone)
	}
	wantDevices[held[gone][0]] = "allocated default/" + full(waiting) + "/main"
	devicesListed(t, d, wantDevices)
}

// devicesListed checks the devices d's GET /devices lists (as get devices
// shows them): each device's state and holders ("allocated ns/pod/c"),
// "free" for none; a device is free unless want names it.
func devicesListed(t *testing.T, d *harness.Daemon, want map[string]string) {
	t.Helper()
	list, err := d.Client().Devices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, dev := range list.Devices {
		s := dev.State
		for _, h := range dev.HeldBy {
			s += " " + h.Pod + "/" + h.Container
		}
		if s != "free" {
			got[dev.Name] = s
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("GET /devices lists %v, want %v (others free)", got, want)
	}
}

// syncedLine is staticlet's debug line for a pass over a pod: when it
// was, and how long until the next.
var syncedLine = regexp.MustCompile(`time=(\S+) level=DEBUG msg="synced pod" pod=(\S+) took=\S+ again=(\S+)`)

// nextRetry is when staticlet's log out last said it would look at pod
// again; the zero time when it said none.
func nextRetry(t *testing.T, out, pod string) time.Time {
	t.Helper()
	var due time.Time
	for _, m := range syncedLine.FindAllStringSubmatch(out, -1) {
		if m[2] != pod {
			continue
		}
		at, err1 := time.Parse(time.RFC3339Nano, m[1])
		again, err2 := time.ParseDuration(m[3])
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("staticlet's line of a pass over %s: %v", pod, err)
		}
		due = time.Time{}
		if again > 0 {
			due = at.Add(again)
		}
	}
	return due
}

// TestDevicesAnnotationAll: a pod whose CDI annotation names every device
// of the kind (=all) sees and writes each, holding none: two pods asking
// for one each by their limits still run beside it, and GET /devices
// lists every holder. A plain pod sees none of them.
func TestDevicesAnnotationAll(t *testing.T) {
	e := harness.NewEnv(t)
	d, _ := startWithVendor(t, e, 2)
	e.Write("all.yaml", devicePod("all", "  annotations:\n    cdi.k8s.io/x: "+devKind+"=all\n", ""))
	e.Write("one.yaml", devicePod("one", "  annotations:\n    cdi.k8s.io/y: "+devKind+"=d1\n", ""))
	e.Write("plain.yaml", devicePod("plain", "", ""))
	e.Write("a.yaml", devicePod("a", "", askDevices(devKind, "1")))
	e.Write("b.yaml", devicePod("b", "", askDevices(devKind, "1")))
	for pod, want := range map[string]string{
		"all":   "/dev/testdev0+w /dev/testdev1+w TESTDEV0=yes TESTDEV1=yes",
		"one":   "/dev/testdev1+w TESTDEV1=yes",
		"plain": "",
	} {
		p := d.WaitPod(pod+"-"+harness.TestNode, time.Minute, pod+" running", harness.Running)
		if got := devicesSeen(t, d, pod+"-"+harness.TestNode); got != want {
			t.Errorf("pod %s sees %q, want %q", pod, got, want)
		}
		if held := heldDevices(p); len(held) != 0 {
			t.Errorf("pod %s holds %v; annotations hold nothing", pod, held)
		}
	}
	holders := map[string][]string{
		devKind + "=d0": {"default/all-" + harness.TestNode + "/main"},
		devKind + "=d1": {"default/all-" + harness.TestNode + "/main", "default/one-" + harness.TestNode + "/main"},
	}
	for _, pod := range []string{"a", "b"} {
		p := d.WaitPod(pod+"-"+harness.TestNode, time.Minute, pod+" running", harness.Running)
		held := heldDevices(p)
		if len(held) != 1 {
			t.Fatalf("pod %s holds %v, want one device", pod, held)
		}
		holders[held[0]] = append(holders[held[0]], "default/"+pod+"-"+harness.TestNode+"/main")
	}
	want := map[string]string{}
	for dev, hs := range holders {
		slices.Sort(hs)
		want[dev] = "allocated " + strings.Join(hs, " ")
	}
	devicesListed(t, d, want)
}

// TestDevicesValidation: a fractional count of devices, a request unequal
// to its limit and a request without a limit are refused by staticlet
// validate and on the file, naming the field; a kind or device that no
// CDI spec names, or more devices than the specs name, are refused on the
// file. A spec written later for the unknown kind lets its pods run,
// their manifests untouched.
func TestDevicesValidation(t *testing.T) {
	e := harness.NewEnv(t)
	d, specDir := startWithVendor(t, e, 2)
	bad := map[string]struct{ manifest, want string }{
		"fraction.yaml": {devicePod("fraction", "", askDevices(devKind, "500m")),
			`spec.containers[0].resources.limits[example.test/dev]: Invalid value: "500m": must be an integer`},
		"unequal.yaml": {devicePod("unequal", "", "    resources:\n      requests: {"+devKind+": 1}\n      limits: {"+devKind+": 2}\n"),
			`spec.containers[0].resources.requests[example.test/dev]: Invalid value: "1": must be equal to example.test/dev limit of 2`},
		"nolimit.yaml": {devicePod("nolimit", "", "    resources:\n      requests: {"+devKind+": 1}\n"),
			`spec.containers[0].resources.limits[example.test/dev]: Required value`},
	}
	unknown := map[string]struct{ manifest, want string }{
		"kind.yaml": {devicePod("kind", "", askDevices("nosuch.test/dev", "1")),
			"spec.containers[0].resources.limits[nosuch.test/dev]: no CDI spec on this node defines device kind nosuch.test/dev"},
		"toomany.yaml": {devicePod("toomany", "", askDevices(devKind, "3")),
			"spec.containers[0].resources.limits[example.test/dev]: asks for 3 devices of kind example.test/dev, and the node's CDI specs define 2"},
		"device.yaml": {devicePod("device", "  annotations:\n    cdi.k8s.io/x: nosuch.test/dev=d0\n", ""),
			"metadata.annotations[cdi.k8s.io/x]: no CDI spec on this node defines device nosuch.test/dev=d0"},
	}
	for file, m := range bad {
		path := filepath.Join(t.TempDir(), file)
		if err := os.WriteFile(path, []byte(m.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(harness.Binary(t), "validate", path).CombinedOutput()
		if code := harness.ExitCodeOf(err); code != 1 || !strings.Contains(string(out), m.want) {
			t.Errorf("staticlet validate %s: exit %d, %q; want exit 1 and %q", file, code, out, m.want)
		}
	}
	for _, files := range []map[string]struct{ manifest, want string }{bad, unknown} {
		for file, m := range files {
			e.Write(file, m.manifest)
		}
	}
	fileErrors := func() map[string]string {
		ms, err := d.Client().Manifests(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range ms {
			out[filepath.Base(m.Path)] = m.Error
		}
		return out
	}
	harness.WaitFor(t, 30*time.Second, "an error on each file naming the field", func() (bool, string) {
		got := fileErrors()
		for _, files := range []map[string]struct{ manifest, want string }{bad, unknown} {
			for file, m := range files {
				if !strings.Contains(got[file], m.want) {
					return false, fmt.Sprintf("%s: %q, want %q", file, got[file], m.want)
				}
			}
		}
		return true, ""
	})
	if out, err := d.CLI("get", "manifests"); err != nil || !strings.Contains(out, unknown["kind.yaml"].want) {
		t.Errorf("get manifests = %q, %v; want it to show %q", out, err, unknown["kind.yaml"].want)
	}
	if list, err := d.Client().Pods(t.Context()); err != nil || len(list.Items) != 0 {
		t.Errorf("pods listed: %v (%v), want none", list, err)
	}

	// A spec naming the kind, written later, lets both pods run.
	cditest.WriteVendor(t, specDir, "nosuch.test/dev", "nosuch", 1)
	written := time.Now()
	for file, want := range map[string]string{"kind": "/dev/nosuch0+w NOSUCH0=yes", "device": "/dev/nosuch0+w NOSUCH0=yes"} {
		d.WaitPod(file+"-"+harness.TestNode, 30*time.Second, file+" running", harness.Running)
		t.Logf("pod %s running %s after the spec was written", file, time.Since(written).Round(time.Millisecond))
		script := `for f in /dev/nosuch*; do [ -e "$f" ] && printf '%s' "$f" && echo x > "$f" && printf +w; echo; done; env | grep '^NOSUCH' | sort`
		out, errOut, code := execStaticlet(d, nil, file+"-"+harness.TestNode, "--", "sh", "-c", script)
		if got := strings.Join(strings.Fields(out), " "); code != 0 || got != want {
			t.Errorf("pod %s sees %q (exit %d, %s), want %q", file, got, code, errOut, want)
		}
	}
	if got := fileErrors(); got["kind.yaml"] != "" || got["device.yaml"] != "" {
		t.Errorf("errors on the files once the spec names their devices: %q, %q; want none", got["kind.yaml"], got["device.yaml"])
	}
}

// TestDevicesCgroup: the device cgroup lets a container open the CDI
// device it holds and no other. The device is a node of no driver: a
// plain pod shown it by a hostPath CharDevice volume cannot open it
// (EPERM, the cgroup's refusal, as with the kubelet); the pod holding it
// by its limits gets past the cgroup to the missing driver (ENXIO), and
// so does a privileged pod through the same volume.
func TestDevicesCgroup(t *testing.T) {
	e := harness.NewEnv(t)
	node := filepath.Join(t.TempDir(), "nodrv")
	cditest.MknodNoDriver(t, node)
	specDir := t.TempDir()
	cditest.WriteSpec(t, specDir, "example.test/nodrv", "nodrv", []string{node})
	d := e.Start("--cdi-spec-dirs", specDir)
	volume := "    volumeMounts: [{name: dev, mountPath: /mnt/nodrv}]\n  volumes:\n  - name: dev\n    hostPath: {path: " + node + ", type: CharDevice}\n"
	const denied, allowed = "Operation not permitted", "No such device or address"
	for _, tc := range []struct{ pod, container, path, want string }{
		{"holder", askDevices("example.test/nodrv", "1"), "/dev/nodrv0", allowed},
		{"plain", volume, "/mnt/nodrv", denied},
		{"priv", "    securityContext: {privileged: true}\n" + volume, "/mnt/nodrv", allowed},
	} {
		e.Write(tc.pod+".yaml", devicePod(tc.pod, "", tc.container))
		name := tc.pod + "-" + harness.TestNode
		d.WaitPod(name, time.Minute, tc.pod+" running", harness.Running)
		out, errOut, code := execStaticlet(d, nil, name, "--", "sh", "-c", "(: < "+tc.path+") 2>&1; true")
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("opening %s in pod %s: %q (exit %d, %s), want %q", tc.path, tc.pod, out, code, errOut, tc.want)
		}
	}
}

// TestDevicesSpecChanges: the specs change under running pods. A device
// added to the spec starts a pod waiting for one at once. A spec removed
// leaves its devices' holders running, their files in error naming the
// field, the devices listed held with no spec, while a pod written then
// starts; written back, the errors go and nothing restarted.
func TestDevicesSpecChanges(t *testing.T) {
	e := harness.NewEnv(t)
	d, specDir := startWithVendor(t, e, 1)
	full := func(name string) string { return name + "-" + harness.TestNode }
	e.Write("a.yaml", devicePod("a", "", askDevices(devKind, "1")))
	first := d.WaitPod(full("a"), time.Minute, "a running", harness.Running)
	e.Write("b.yaml", devicePod("b", "", askDevices(devKind, "1")))
	d.WaitPod(full("b"), time.Minute, "b waiting for devices", waitingFor([]string{"InsufficientDevices"}))

	// A second device.
	var due time.Time
	harness.WaitFor(t, 30*time.Second, "the retries of b backing off to 3s", func() (bool, string) {
		due = nextRetry(t, d.Out.String(), "default/"+full("b"))
		return time.Until(due) > 3*time.Second, "next retry at " + due.String()
	})
	spec := cditest.WriteVendor(t, specDir, devKind, "testdev", 2)
	written := time.Now()
	second := d.WaitPod(full("b"), 30*time.Second, "b running", harness.Running)
	started := time.Now()
	t.Logf("pod b running %s after a device was added, %s before its backoff ended", started.Sub(written).Round(time.Millisecond), due.Sub(started).Round(time.Millisecond))
	if started.After(due) {
		t.Errorf("pod b started at %s, after its backoff ended (%s): the added device did not wake it", started, due)
	}
	want := map[string]string{
		devKind + "=d0": "allocated default/" + full("a") + "/main",
		devKind + "=d1": "allocated default/" + full("b") + "/main",
	}
	devicesListed(t, d, want)

	// The spec goes, then comes back.
	if err := os.Rename(spec, spec+".away"); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 30*time.Second, "errors on a.yaml and b.yaml", func() (bool, string) {
		ms, err := d.Client().Manifests(t.Context())
		if err != nil {
			return false, err.Error()
		}
		var errs []string
		for _, m := range ms {
			if m.Error != "" && strings.Contains(m.Error, "spec.containers[0].resources.limits["+devKind+"]") {
				errs = append(errs, m.Error)
			}
		}
		return len(errs) == 2, strings.Join(errs, "; ")
	})
	list, err := d.Client().Devices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range list.Devices {
		if dev.Spec != "" {
			t.Errorf("device %s listed with spec %s after its spec went", dev.Name, dev.Spec)
		}
	}
	devicesListed(t, d, want)
	// A pod written after runs once the reconciler has the set without
	// the spec: the holders still run then.
	e.Write("c.yaml", devicePod("c", "", ""))
	d.WaitPod(full("c"), 30*time.Second, "c running", harness.Running)
	for name, before := range map[string]*v1.Pod{"a": first, "b": second} {
		p, err := d.Pod(full(name))
		if err != nil || !harness.Running(p) || p.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
			t.Fatalf("pod %s, its spec gone: %v %v, want its container %s running", name, err, p, before.Status.ContainerStatuses[0].ContainerID)
		}
	}
	if err := os.Rename(spec+".away", spec); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 30*time.Second, "no errors on the files", func() (bool, string) {
		ms, err := d.Client().Manifests(t.Context())
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ms {
			if m.Error != "" {
				return false, m.Error
			}
		}
		return true, ""
	})
	for name, before := range map[string]*v1.Pod{"a": first, "b": second} {
		p := d.WaitPod(full(name), 10*time.Second, name+" running", harness.Running)
		if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != before.Status.ContainerStatuses[0].ContainerID || cs.RestartCount != 0 {
			t.Errorf("pod %s: container %s (restarts %d), want %s untouched", name, cs.ContainerID, cs.RestartCount, before.Status.ContainerStatuses[0].ContainerID)
		}
	}
	devicesListed(t, d, want)
}

// TestDevicesContainerRestart: a container that exits and is restarted
// gets the device it had, though another is first in order now.
func TestDevicesContainerRestart(t *testing.T) {
	e := harness.NewEnv(t)
	d, _ := startWithVendor(t, e, 2)
	full := func(name string) string { return name + "-" + harness.TestNode }
	e.Write("a.yaml", devicePod("a", "", askDevices(devKind, "1")))
	d.WaitPod(full("a"), time.Minute, "a running", harness.Running)
	e.Write("b.yaml", devicePod("b", "", askDevices(devKind, "1")))
	p := d.WaitPod(full("b"), time.Minute, "b running", harness.Running)
	if got, want := heldDevices(p), []string{devKind + "=d1"}; !slices.Equal(got, want) {
		t.Fatalf("pod b holds %v, want %v", got, want)
	}
	e.Remove("a.yaml")
	harness.WaitFor(t, 30*time.Second, "a removed", func() (bool, string) {
		_, err := d.Pod(full("a"))
		return err != nil, "still listed"
	})
	// Its shell leaves its loop on SIGTERM, and is restarted.
	before := p.Status.ContainerStatuses[0].ContainerID
	if err := syscall.Kill(containerPid(t, e, p, "main"), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p = d.WaitPod(full("b"), 30*time.Second, "b restarted", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if got, want := heldDevices(p), []string{devKind + "=d1"}; !slices.Equal(got, want) || p.Status.ContainerStatuses[0].ContainerID == before {
		t.Errorf("pod b's restarted container %s holds %v, want a new container holding %v", p.Status.ContainerStatuses[0].ContainerID, got, want)
	}
	if got, want := devicesSeen(t, d, full("b")), "/dev/testdev1+w TESTDEV1=yes"; got != want {
		t.Errorf("pod b sees %q after its restart, want %q", got, want)
	}
}

// TestDevicesReplaced: a pod holding the only device of its kind gets it
// again when an edit of its manifest replaces its container, then its
// whole sandbox, without waiting for it.
func TestDevicesReplaced(t *testing.T) {
	e := harness.NewEnv(t)
	d, _ := startWithVendor(t, e, 1)
	name := "a-" + harness.TestNode
	manifest := devicePod("a", "", askDevices(devKind, "1"))
	e.Write("a.yaml", manifest)
	p := d.WaitPod(name, time.Minute, "a running", harness.Running)
	for _, edit := range []struct{ what, old, new string }{
		{"its container", "sleep 1 &", "sleep 2 &"},
		{"its sandbox", "spec:\n", "spec:\n  hostNetwork: true\n"},
	} {
		before := p.Status.ContainerStatuses[0].ContainerID
		manifest = strings.Replace(manifest, edit.old, edit.new, 1)
		e.Write("a.yaml", manifest)
		p = d.WaitPod(name, 30*time.Second, "a with "+edit.what+" replaced", func(p *v1.Pod) bool {
			return harness.Running(p) && p.Status.ContainerStatuses[0].ContainerID != before
		})
		if got, want := heldDevices(p), []string{devKind + "=d0"}; !slices.Equal(got, want) {
			t.Errorf("pod a, %s replaced, holds %v, want %v", edit.what, got, want)
		}
	}
	events, err := d.Client().Events(t.Context(), "default/"+name)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Type == pod.EventWarning {
			t.Errorf("Warning event %s: %s", ev.Reason, ev.Message)
		}
	}
}

// TestDevicesInitContainer: with one device, a pod's init container
// holds it while it runs, and its main container takes it once the init
// container has run to its end, as the kubelet's device manager lets it.
func TestDevicesInitContainer(t *testing.T) {
	e := harness.NewEnv(t)
	d, _ := startWithVendor(t, e, 1)
	init := "  initContainers:\n  - name: init\n    image: localhost/busybox:test\n    command: [sh, -c, 'echo x > /dev/testdev0']\n" + askDevices(devKind, "1")
	manifest := strings.Replace(devicePod("a", "", askDevices(devKind, "1")), "  containers:\n", init+"  containers:\n", 1)
	e.Write("a.yaml", manifest)
	p := d.WaitPod("a-"+harness.TestNode, time.Minute, "a running", harness.Running)
	if ics := p.Status.InitContainerStatuses; len(ics) != 1 || ics[0].State.Terminated == nil || ics[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container: %s, want it done, having written to its device", harness.Describe(p))
	}
	if got, want := devicesSeen(t, d, "a-"+harness.TestNode), "/dev/testdev0+w TESTDEV0=yes"; got != want {
		t.Errorf("pod a's main container sees %q, want %q", got, want)
	}
	devicesListed(t, d, map[string]string{devKind + "=d0": "allocated default/a-" + harness.TestNode + "/main"})
}
