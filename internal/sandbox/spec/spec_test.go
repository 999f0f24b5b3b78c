package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// decodePod decodes one pod manifest as staticlet's sources would, on node "n".
func decodePod(t *testing.T, manifest string) *pod.Pod {
	t.Helper()
	pods, err := pod.Decode("t.yaml", []byte(manifest), pod.Options{NodeName: "n"})
	if err != nil {
		t.Fatalf("pod.Decode:\n%s\nerror: %v", manifest, err)
	}
	if len(pods) != 1 {
		t.Fatalf("pod.Decode: got %d pods, want 1", len(pods))
	}
	return pods[0]
}

// simplePod is a pod with one container "c" whose container fields (indented
// by four spaces) are extra and whose pod spec fields (indented by two) are
// podExtra.
func simplePod(t *testing.T, extra, podExtra string) *pod.Pod {
	t.Helper()
	return decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
`+podExtra+`
  containers:
  - name: c
    image: busybox
`+extra)
}

// mustContainer builds the spec of p's first container with the given
// options, failing the test on error.
func mustContainer(t *testing.T, p *pod.Pod, o ContainerOptions) *specs.Spec {
	t.Helper()
	s, err := Container(p, &p.Spec.Containers[0], o)
	if err != nil {
		t.Fatalf("Container(%s): %v", p, err)
	}
	return s
}

func TestProcessArgs(t *testing.T) {
	img := ImageConfig{Entrypoint: []string{"/entry", "-e"}, Cmd: []string{"serve", "--port=80"}}
	tests := []struct {
		name    string
		command []string
		args    []string
		image   ImageConfig
		want    []string
	}{
		{"command replaces entrypoint and cmd", []string{"/bin/sh"}, nil, img, []string{"/bin/sh"}},
		{"command and args", []string{"/bin/sh", "-c"}, []string{"echo hi"}, img, []string{"/bin/sh", "-c", "echo hi"}},
		{"args alone replace cmd", nil, []string{"run", "-v"}, img, []string{"/entry", "-e", "run", "-v"}},
		{"args alone with no entrypoint", nil, []string{"sh"}, ImageConfig{Cmd: []string{"true"}}, []string{"sh"}},
		{"neither: entrypoint and cmd", nil, nil, img, []string{"/entry", "-e", "serve", "--port=80"}},
		{"neither: cmd only", nil, nil, ImageConfig{Cmd: []string{"sh"}}, []string{"sh"}},
		{"neither: entrypoint only", nil, nil, ImageConfig{Entrypoint: []string{"/init"}}, []string{"/init"}},
		{"none at all", nil, nil, ImageConfig{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", Command: tt.command, Args: tt.args}
			if got := processArgs(c, tt.image); !slices.Equal(got, tt.want) {
				t.Errorf("processArgs(command %q, args %q, image %+v) = %q, want %q", tt.command, tt.args, tt.image, got, tt.want)
			}
		})
	}
}

func TestContainerArgs(t *testing.T) {
	tests := []struct {
		name    string
		extra   string
		image   ImageConfig
		want    []string
		wantErr string
	}{
		{
			name:  "command from the manifest",
			extra: "    command: [/bin/sh, -c]\n    args: [\"exit 0\"]\n",
			image: ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"x"}},
			want:  []string{"/bin/sh", "-c", "exit 0"},
		},
		{
			name:  "image entrypoint and cmd",
			image: ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"x"}},
			want:  []string{"/entry", "x"},
		},
		{
			name:    "no command anywhere",
			image:   ImageConfig{},
			wantErr: `container "c": no command`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, tt.extra, "")
			s, err := Container(p, &p.Spec.Containers[0], ContainerOptions{Image: tt.image})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Container() error = %v, want one containing %q", err, tt.wantErr)
				}
				if s != nil {
					t.Errorf("Container() spec = %+v with an error, want nil", s)
				}
				return
			}
			if err != nil {
				t.Fatalf("Container() error = %v", err)
			}
			if !slices.Equal(s.Process.Args, tt.want) {
				t.Errorf("Container() args = %q, want %q", s.Process.Args, tt.want)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	tests := []struct {
		name  string
		image []string
		vars  []v1.EnvVar
		want  []string
	}{
		{
			name: "nothing: default PATH",
			want: []string{defaultPath},
		},
		{
			name:  "image PATH kept",
			image: []string{"PATH=/bin", "A=1"},
			want:  []string{"PATH=/bin", "A=1"},
		},
		{
			name:  "container overrides image in place",
			image: []string{"A=1", "B=2", "C=3"},
			vars:  []v1.EnvVar{{Name: "B", Value: "two"}, {Name: "D", Value: "4"}},
			want:  []string{"A=1", "B=two", "C=3", "D=4", defaultPath},
		},
		{
			name: "container sets PATH",
			vars: []v1.EnvVar{{Name: "Z", Value: "z"}, {Name: "PATH", Value: "/opt/bin"}},
			want: []string{"Z=z", "PATH=/opt/bin"},
		},
		{
			name: "container order kept, later duplicate wins",
			vars: []v1.EnvVar{{Name: "B", Value: "1"}, {Name: "A", Value: "2"}, {Name: "B", Value: "3"}},
			want: []string{"B=3", "A=2", defaultPath},
		},
		{
			name:  "value with = and empty value",
			image: []string{"X=a=b"},
			vars:  []v1.EnvVar{{Name: "E", Value: ""}},
			want:  []string{"X=a=b", "E=", defaultPath},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := env(tt.image, tt.vars); !slices.Equal(got, tt.want) {
				t.Errorf("env(%q, %v) = %q, want %q", tt.image, tt.vars, got, tt.want)
			}
		})
	}
}

func TestContainerEnvFromManifest(t *testing.T) {
	p := simplePod(t, "    env:\n    - name: GREETING\n      value: hello\n    - name: PATH\n      value: /x\n", "")
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/bin", "GREETING=hi", "HOME=/root"},
	}})
	want := []string{"PATH=/x", "GREETING=hello", "HOME=/root"}
	if !slices.Equal(s.Process.Env, want) {
		t.Errorf("Container() env = %q, want %q", s.Process.Env, want)
	}
}

func TestProcessUser(t *testing.T) {
	tests := []struct {
		name      string
		podExtra  string
		extra     string
		imageUser string
		want      specs.User
		wantErr   string
	}{
		{name: "no user: root", want: specs.User{}},
		{name: "numeric image user", imageUser: "1000", want: specs.User{UID: 1000}},
		{name: "numeric image user and group", imageUser: "1000:2000", want: specs.User{UID: 1000, GID: 2000}},
		{name: "root by name", imageUser: "root", want: specs.User{}},
		{name: "root:root", imageUser: "root:root", want: specs.User{}},
		{name: "user name", imageUser: "nobody", wantErr: `image user "nobody" is not numeric`},
		{name: "group name", imageUser: "1000:staff", wantErr: `image group "staff" is not numeric`},
		{
			name:      "pod runAsUser over image",
			podExtra:  "  securityContext:\n    runAsUser: 42\n    runAsGroup: 43\n",
			imageUser: "1000:2000",
			want:      specs.User{UID: 42, GID: 43},
		},
		{
			name:     "container over pod",
			podExtra: "  securityContext:\n    runAsUser: 42\n    runAsGroup: 43\n",
			extra:    "    securityContext:\n      runAsUser: 7\n",
			want:     specs.User{UID: 7, GID: 43},
		},
		{
			name:      "container runAsGroup only",
			extra:     "    securityContext:\n      runAsUser: 5\n      runAsGroup: 6\n",
			imageUser: "1",
			want:      specs.User{UID: 5, GID: 6},
		},
		{
			name:     "supplemental groups",
			podExtra: "  securityContext:\n    runAsUser: 1\n    supplementalGroups: [10, 20]\n",
			want:     specs.User{UID: 1, AdditionalGids: []uint32{10, 20}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, tt.extra, tt.podExtra)
			got, err := processUser(p, &p.Spec.Containers[0], tt.imageUser)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("processUser(image user %q) error = %v, want one containing %q", tt.imageUser, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("processUser(image user %q) error = %v", tt.imageUser, err)
			}
			if got.UID != tt.want.UID || got.GID != tt.want.GID || !slices.Equal(got.AdditionalGids, tt.want.AdditionalGids) {
				t.Errorf("processUser(image user %q) = %+v, want %+v", tt.imageUser, got, tt.want)
			}
		})
	}
}

// TestProcessUserNamedImageUserWithRunAsUser: when the security context sets
// runAsUser, the image's USER does not matter (the kubelet passes the uid to
// the runtime, which then ignores the image's user), so an image whose USER
// is a name must still run.
func TestProcessUserNamedImageUserWithRunAsUser(t *testing.T) {
	for _, imageUser := range []string{"nobody", "app:app", "1000:staff"} {
		p := simplePod(t, "", "  securityContext:\n    runAsUser: 65534\n    runAsGroup: 65534\n")
		got, err := processUser(p, &p.Spec.Containers[0], imageUser)
		if err != nil {
			t.Errorf("processUser(image user %q, runAsUser 65534) error = %v, want nil", imageUser, err)
			continue
		}
		if got.UID != 65534 || got.GID != 65534 {
			t.Errorf("processUser(image user %q, runAsUser 65534) = %+v, want uid and gid 65534", imageUser, got)
		}
	}
}

func TestContainerUserError(t *testing.T) {
	p := simplePod(t, "", "")
	_, err := Container(p, &p.Spec.Containers[0], ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}, User: "www-data"}})
	if err == nil || !strings.Contains(err.Error(), `container "c"`) || !strings.Contains(err.Error(), "www-data") {
		t.Errorf("Container() with image user www-data: error = %v, want one naming the container and the user", err)
	}
}

// sortedCaps returns caps sorted, for comparing sets.
func sortedCaps(caps []string) []string {
	out := slices.Clone(caps)
	slices.Sort(out)
	return out
}

func withCaps(extra []string, drop ...string) []string {
	out := append(slices.Clone(defaultCaps), extra...)
	out = slices.DeleteFunc(out, func(c string) bool { return slices.Contains(drop, c) })
	return sortedCaps(out)
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		want  []string
	}{
		{name: "default set", want: sortedCaps(defaultCaps)},
		{
			name:  "add NET_ADMIN",
			extra: "    securityContext:\n      capabilities:\n        add: [NET_ADMIN]\n",
			want:  withCaps([]string{"CAP_NET_ADMIN"}),
		},
		{
			name:  "CAP_ prefix optional and case ignored",
			extra: "    securityContext:\n      capabilities:\n        add: [CAP_SYS_TIME, sys_nice]\n        drop: [CAP_KILL, chown]\n",
			want:  withCaps([]string{"CAP_SYS_TIME", "CAP_SYS_NICE"}, "CAP_KILL", "CAP_CHOWN"),
		},
		{
			name:  "drop some",
			extra: "    securityContext:\n      capabilities:\n        drop: [NET_RAW, MKNOD]\n",
			want:  withCaps(nil, "CAP_NET_RAW", "CAP_MKNOD"),
		},
		{
			name:  "drop ALL",
			extra: "    securityContext:\n      capabilities:\n        drop: [ALL]\n",
			want:  []string{},
		},
		{
			name:  "add ALL then drop one",
			extra: "    securityContext:\n      capabilities:\n        add: [ALL]\n        drop: [SYS_ADMIN]\n",
			want: sortedCaps(slices.DeleteFunc(slices.Clone(allCaps), func(c string) bool {
				return c == "CAP_SYS_ADMIN"
			})),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, tt.extra, "")
			s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}})
			c := s.Process.Capabilities
			if c == nil {
				t.Fatal("Container() capabilities = nil")
			}
			for name, set := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted} {
				if got := sortedCaps(set); !slices.Equal(got, tt.want) {
					t.Errorf("Container() %s capabilities = %q, want %q", name, got, tt.want)
				}
			}
			if !slices.Equal(s.Linux.MaskedPaths, maskedPaths) || !slices.Equal(s.Linux.ReadonlyPaths, readonlyPaths) {
				t.Errorf("Container() masked %q readonly %q, want the defaults", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
			}
		})
	}
}

// TestCapabilitiesDropAllThenAdd: "drop: [ALL], add: [NET_BIND_SERVICE]" is the
// common least-privilege idiom; containerd's CRI (WithCapabilities) applies
// add ALL, then drop ALL, then the individual adds, then the individual
// drops, so the container keeps exactly the capabilities it added.
func TestCapabilitiesDropAllThenAdd(t *testing.T) {
	p := simplePod(t, "    securityContext:\n      capabilities:\n        drop: [ALL]\n        add: [NET_BIND_SERVICE, CAP_CHOWN]\n", "")
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}})
	want := []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE"}
	if got := sortedCaps(s.Process.Capabilities.Bounding); !slices.Equal(got, want) {
		t.Errorf("Container() drop ALL, add NET_BIND_SERVICE and CHOWN: bounding = %q, want %q", got, want)
	}
}

func TestPrivileged(t *testing.T) {
	p := simplePod(t, "    securityContext:\n      privileged: true\n      capabilities:\n        drop: [ALL]\n", "")
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}})
	if got := sortedCaps(s.Process.Capabilities.Bounding); !slices.Equal(got, sortedCaps(allCaps)) {
		t.Errorf("privileged: bounding = %q, want every capability", got)
	}
	if got := sortedCaps(s.Process.Capabilities.Effective); !slices.Equal(got, sortedCaps(allCaps)) {
		t.Errorf("privileged: effective = %q, want every capability", got)
	}
	if len(s.Linux.MaskedPaths) != 0 || len(s.Linux.ReadonlyPaths) != 0 {
		t.Errorf("privileged: masked %q, readonly %q, want none", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	wantDev := []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	if d := s.Linux.Resources.Devices; len(d) != 1 || d[0].Allow != wantDev[0].Allow || d[0].Access != wantDev[0].Access {
		t.Errorf("privileged: devices = %+v, want %+v", d, wantDev)
	}
	for _, m := range s.Mounts {
		if (m.Destination == "/sys" || m.Destination == "/sys/fs/cgroup") && slices.Contains(m.Options, "ro") {
			t.Errorf("privileged: mount %s options %q, want it writable", m.Destination, m.Options)
		}
	}

	// The unprivileged default, for contrast, and to check that building a
	// privileged spec did not change the shared defaults.
	q := simplePod(t, "", "")
	u := mustContainer(t, q, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}})
	if d := u.Linux.Resources.Devices; len(d) != 1 || d[0].Allow {
		t.Errorf("unprivileged: devices = %+v, want all denied", d)
	}
	for _, m := range u.Mounts {
		if (m.Destination == "/sys" || m.Destination == "/sys/fs/cgroup") && !slices.Contains(m.Options, "ro") {
			t.Errorf("unprivileged: mount %s options %q, want ro", m.Destination, m.Options)
		}
	}
	if !slices.Equal(u.Linux.MaskedPaths, maskedPaths) || !slices.Equal(u.Linux.ReadonlyPaths, readonlyPaths) {
		t.Errorf("unprivileged: masked %q readonly %q, want the defaults", u.Linux.MaskedPaths, u.Linux.ReadonlyPaths)
	}
}

func TestRootAndPrivilegeEscalation(t *testing.T) {
	tests := []struct {
		name       string
		extra      string
		wantRO     bool
		wantNoNewP bool
	}{
		{name: "defaults"},
		{name: "readOnlyRootFilesystem", extra: "    securityContext:\n      readOnlyRootFilesystem: true\n", wantRO: true},
		{name: "readOnlyRootFilesystem false", extra: "    securityContext:\n      readOnlyRootFilesystem: false\n"},
		{name: "allowPrivilegeEscalation false", extra: "    securityContext:\n      allowPrivilegeEscalation: false\n", wantNoNewP: true},
		{name: "allowPrivilegeEscalation true", extra: "    securityContext:\n      allowPrivilegeEscalation: true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, tt.extra, "")
			s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}})
			if s.Root == nil || s.Root.Path != "rootfs" {
				t.Fatalf("Container() root = %+v, want path rootfs", s.Root)
			}
			if s.Root.Readonly != tt.wantRO {
				t.Errorf("Container() root read-only = %v, want %v", s.Root.Readonly, tt.wantRO)
			}
			if s.Process.NoNewPrivileges != tt.wantNoNewP {
				t.Errorf("Container() NoNewPrivileges = %v, want %v", s.Process.NoNewPrivileges, tt.wantNoNewP)
			}
		})
	}
}

// nsList renders namespaces as "type" or "type=path", in order.
func nsList(ns []specs.LinuxNamespace) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n.Type)
		if n.Path != "" {
			out[i] += "=" + n.Path
		}
	}
	return out
}

func TestNamespaces(t *testing.T) {
	const pid = 4242
	p := func(name string) string {
		return fmt.Sprintf("%s=/proc/%d/ns/%s", name, pid, map[string]string{"network": "net", "uts": "uts", "ipc": "ipc", "pid": "pid"}[name])
	}
	tests := []struct {
		name          string
		podExtra      string
		wantSandbox   []string
		wantContainer []string
	}{
		{
			name:          "own namespaces",
			wantSandbox:   []string{"mount", "network", "uts", "ipc", "pid"},
			wantContainer: []string{"mount", p("network"), p("uts"), p("ipc"), "pid"},
		},
		{
			name:          "hostNetwork",
			podExtra:      "  hostNetwork: true\n",
			wantSandbox:   []string{"mount", "ipc", "pid"},
			wantContainer: []string{"mount", p("ipc"), "pid"},
		},
		{
			name:          "hostPID",
			podExtra:      "  hostPID: true\n",
			wantSandbox:   []string{"mount", "network", "uts", "ipc"},
			wantContainer: []string{"mount", p("network"), p("uts"), p("ipc")},
		},
		{
			name:          "hostIPC",
			podExtra:      "  hostIPC: true\n",
			wantSandbox:   []string{"mount", "network", "uts", "pid"},
			wantContainer: []string{"mount", p("network"), p("uts"), "pid"},
		},
		{
			name:          "shareProcessNamespace",
			podExtra:      "  shareProcessNamespace: true\n",
			wantSandbox:   []string{"mount", "network", "uts", "ipc", "pid"},
			wantContainer: []string{"mount", p("network"), p("uts"), p("ipc"), p("pid")},
		},
		{
			name:          "all host namespaces",
			podExtra:      "  hostNetwork: true\n  hostPID: true\n  hostIPC: true\n",
			wantSandbox:   []string{"mount"},
			wantContainer: []string{"mount"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pd := simplePod(t, "", tt.podExtra)
			sb := Sandbox(pd, SandboxOptions{Rootfs: "/r", Args: []string{"/pause", "pause"}, CgroupsPath: "/s/sb"})
			if got := nsList(sb.Linux.Namespaces); !slices.Equal(got, tt.wantSandbox) {
				t.Errorf("Sandbox() namespaces = %q, want %q", got, tt.wantSandbox)
			}
			c := mustContainer(t, pd, ContainerOptions{SandboxPID: pid, Image: ImageConfig{Cmd: []string{"sh"}}})
			if got := nsList(c.Linux.Namespaces); !slices.Equal(got, tt.wantContainer) {
				t.Errorf("Container() namespaces = %q, want %q", got, tt.wantContainer)
			}
			// A container joins its sandbox's UTS namespace, so it must not
			// set a host name of its own (runc refuses without a new one).
			if c.Hostname != "" {
				t.Errorf("Container() hostname = %q, want none", c.Hostname)
			}
		})
	}
}

// TestPinnedNamespaces: sandbox and containers join the pod's pinned
// namespaces by path; a pinned UTS namespace already has its host name.
func TestPinnedNamespaces(t *testing.T) {
	const pid = 4242
	pins := map[specs.LinuxNamespaceType]string{
		specs.NetworkNamespace: "/pin/net", specs.UTSNamespace: "/pin/uts", specs.IPCNamespace: "/pin/ipc",
	}
	tests := []struct {
		name          string
		podExtra      string
		pinned        []specs.LinuxNamespaceType
		wantSandbox   []string
		wantContainer []string
		wantHostname  string
	}{
		{
			name:          "all pinned",
			pinned:        []specs.LinuxNamespaceType{specs.NetworkNamespace, specs.UTSNamespace, specs.IPCNamespace},
			wantSandbox:   []string{"mount", "network=/pin/net", "uts=/pin/uts", "ipc=/pin/ipc", "pid"},
			wantContainer: []string{"mount", "network=/pin/net", "uts=/pin/uts", "ipc=/pin/ipc", "pid"},
		},
		{
			name:          "hostNetwork: IPC pinned",
			podExtra:      "  hostNetwork: true\n",
			pinned:        []specs.LinuxNamespaceType{specs.IPCNamespace},
			wantSandbox:   []string{"mount", "ipc=/pin/ipc", "pid"},
			wantContainer: []string{"mount", "ipc=/pin/ipc", "pid"},
		},
		{
			name:          "shared PID namespace",
			podExtra:      "  shareProcessNamespace: true\n",
			pinned:        []specs.LinuxNamespaceType{specs.NetworkNamespace, specs.UTSNamespace, specs.IPCNamespace},
			wantSandbox:   []string{"mount", "network=/pin/net", "uts=/pin/uts", "ipc=/pin/ipc", "pid"},
			wantContainer: []string{"mount", "network=/pin/net", "uts=/pin/uts", "ipc=/pin/ipc", fmt.Sprintf("pid=/proc/%d/ns/pid", pid)},
		},
		{
			name:          "network pinned, UTS not: the sandbox names it",
			pinned:        []specs.LinuxNamespaceType{specs.NetworkNamespace, specs.IPCNamespace},
			wantSandbox:   []string{"mount", "network=/pin/net", "uts", "ipc=/pin/ipc", "pid"},
			wantContainer: []string{"mount", "network=/pin/net", fmt.Sprintf("uts=/proc/%d/ns/uts", pid), "ipc=/pin/ipc", "pid"},
			wantHostname:  "web-n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pd := simplePod(t, "", tt.podExtra)
			pinned := map[specs.LinuxNamespaceType]string{}
			for _, k := range tt.pinned {
				pinned[k] = pins[k]
			}
			sb := Sandbox(pd, SandboxOptions{Rootfs: "/r", Args: []string{"/pause"}, Namespaces: pinned})
			if got := nsList(sb.Linux.Namespaces); !slices.Equal(got, tt.wantSandbox) {
				t.Errorf("Sandbox() namespaces = %q, want %q", got, tt.wantSandbox)
			}
			if sb.Hostname != tt.wantHostname {
				t.Errorf("Sandbox() hostname = %q, want %q", sb.Hostname, tt.wantHostname)
			}
			c := mustContainer(t, pd, ContainerOptions{Namespaces: pinned, SandboxPID: pid, Image: ImageConfig{Cmd: []string{"sh"}}})
			if got := nsList(c.Linux.Namespaces); !slices.Equal(got, tt.wantContainer) {
				t.Errorf("Container() namespaces = %q, want %q", got, tt.wantContainer)
			}
		})
	}
}

func TestSandbox(t *testing.T) {
	p := simplePod(t, "", "")
	s := Sandbox(p, SandboxOptions{Rootfs: "/root/pause", Args: []string{"/pause", "pause"}, CgroupsPath: "/staticlet/x",
		Env: []string{"LD_LIBRARY_PATH=/lib/x"}})
	if want := []string{defaultPath, "LD_LIBRARY_PATH=/lib/x"}; !slices.Equal(s.Process.Env, want) {
		t.Errorf("Sandbox() env = %q, want %q", s.Process.Env, want)
	}
	if s.Root == nil || s.Root.Path != "/root/pause" || !s.Root.Readonly {
		t.Errorf("Sandbox() root = %+v, want /root/pause read-only", s.Root)
	}
	if !slices.Equal(s.Process.Args, []string{"/pause", "pause"}) {
		t.Errorf("Sandbox() args = %q, want [/pause pause]", s.Process.Args)
	}
	if s.Linux.CgroupsPath != "/staticlet/x" {
		t.Errorf("Sandbox() cgroups path = %q, want /staticlet/x", s.Linux.CgroupsPath)
	}
	if !s.Process.NoNewPrivileges {
		t.Error("Sandbox() NoNewPrivileges = false, want true")
	}
	if c := s.Process.Capabilities; c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted) != 0 {
		t.Errorf("Sandbox() capabilities = %+v, want none", c)
	}
	if s.Process.User.UID != 0 {
		t.Errorf("Sandbox() uid = %d, want 0", s.Process.User.UID)
	}
}

func TestHostname(t *testing.T) {
	tests := []struct {
		name     string
		meta     string
		podExtra string
		want     string
	}{
		{name: "pod name", meta: "web", want: "web-n"},
		{name: "spec.hostname", meta: "web", podExtra: "  hostname: myhost\n", want: "myhost"},
		{name: "spec.hostnameOverride", meta: "web", podExtra: "  hostname: myhost\n  hostnameOverride: my.host.example\n", want: "my.host.example"},
		{name: "63-byte cut", meta: strings.Repeat("x", 70), want: strings.Repeat("x", 63)},
		{name: "cut drops trailing dashes", meta: strings.Repeat("a", 61) + "--b", want: strings.Repeat("a", 61)},
		{name: "cut drops a trailing dot", meta: strings.Repeat("a", 62) + ".b", want: strings.Repeat("a", 62)},
		{name: "cut inside a dotted name", meta: strings.Repeat("a", 60) + "-b.c-dddd", want: strings.Repeat("a", 60) + "-b"},
		{name: "hostNetwork: none", meta: "web", podExtra: "  hostNetwork: true\n", want: ""},
		{name: "hostNetwork with spec.hostname: none", meta: "web", podExtra: "  hostNetwork: true\n  hostname: h\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := decodePod(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: "+tt.meta+"\nspec:\n"+tt.podExtra+
				"  containers:\n  - name: c\n    image: busybox\n")
			s := Sandbox(p, SandboxOptions{Rootfs: "/r", Args: []string{"/pause"}})
			if s.Hostname != tt.want {
				t.Errorf("Sandbox(%q) hostname = %q, want %q", p.Name, s.Hostname, tt.want)
			}
			if len(s.Hostname) > 63 {
				t.Errorf("Sandbox(%q) hostname is %d bytes, want at most 63", p.Name, len(s.Hostname))
			}
		})
	}
}

func TestVolumeMounts(t *testing.T) {
	const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  volumes:
  - name: data
    emptyDir: {}
  - name: conf
    hostPath:
      path: /etc/app
  containers:
  - name: c
    image: busybox
    volumeMounts:
    - name: data
      mountPath: /data
    - name: conf
      mountPath: /etc/app
      readOnly: true
    - name: data
      mountPath: /cache
      subPath: cache/x
    - name: data
      mountPath: var/./tmp
`
	p := decodePod(t, manifest)
	vols := map[string]string{"data": "/var/lib/staticlet/pods/u/volumes/empty-dir/data", "conf": "/etc/app"}
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: vols})
	want := []specs.Mount{
		{Destination: "/data", Type: "bind", Source: vols["data"], Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/etc/app", Type: "bind", Source: "/etc/app", Options: []string{"rbind", "rprivate", "ro"}},
		{Destination: "/cache", Type: "bind", Source: vols["data"] + "/cache/x", Options: []string{"rbind", "rprivate", "rw"}},
		// A relative mountPath is taken from /, as the kubelet takes it.
		{Destination: "/var/tmp", Type: "bind", Source: vols["data"], Options: []string{"rbind", "rprivate", "rw"}},
	}
	byDest := map[string]specs.Mount{}
	for _, m := range s.Mounts {
		byDest[m.Destination] = m
	}
	for _, w := range want {
		got, ok := byDest[w.Destination]
		if !ok {
			t.Errorf("Container() has no mount at %s; mounts %+v", w.Destination, s.Mounts)
			continue
		}
		if got.Type != w.Type || got.Source != w.Source || !slices.Equal(got.Options, w.Options) {
			t.Errorf("Container() mount at %s = %+v, want %+v", w.Destination, got, w)
		}
	}
	// Volume mounts come after the base mounts, so /dev, /proc and /sys are
	// in place below them.
	if n := len(s.Mounts); n < len(want) || s.Mounts[n-len(want)].Destination != "/data" {
		t.Errorf("Container() mounts = %+v, want the volume mounts last, in manifest order", s.Mounts)
	}

	// A volume the caller did not resolve is an error naming it.
	delete(vols, "conf")
	_, err := Container(p, &p.Spec.Containers[0], ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: vols})
	if err == nil || !strings.Contains(err.Error(), `volume "conf"`) || !strings.Contains(err.Error(), "volumeMounts[1]") {
		t.Errorf("Container() with volume conf unresolved: error = %v, want one naming volumeMounts[1] and volume \"conf\"", err)
	}
}

func TestWorkingDirAndCgroup(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		image string
		want  string
	}{
		{name: "default", want: "/"},
		{name: "image", image: "/srv", want: "/srv"},
		{name: "manifest over image", extra: "    workingDir: /work\n", image: "/srv", want: "/work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, tt.extra, "")
			s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}, WorkingDir: tt.image}, CgroupsPath: "/ns/id"})
			if s.Process.Cwd != tt.want {
				t.Errorf("Container() cwd = %q, want %q", s.Process.Cwd, tt.want)
			}
			if s.Linux.CgroupsPath != "/ns/id" {
				t.Errorf("Container() cgroups path = %q, want /ns/id", s.Linux.CgroupsPath)
			}
		})
	}
}

// TestVolumeMountSubPathExpr: validation accepts subPathExpr, and the
// kubelet mounts the expanded subdirectory; mounting the whole volume
// instead would silently share what the pod meant to keep apart.
func TestVolumeMountSubPathExpr(t *testing.T) {
	p := decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  volumes:
  - name: data
    emptyDir: {}
  containers:
  - name: c
    image: busybox
    env:
    - name: DIR
      value: mine
    volumeMounts:
    - name: data
      mountPath: /data
      subPathExpr: $(DIR)
`)
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: map[string]string{"data": "/v/data"}})
	for _, m := range s.Mounts {
		if m.Destination == "/data" && m.Source != "/v/data/mine" {
			t.Errorf("Container() mount at /data from %s, want /v/data/mine", m.Source)
		}
	}
}

// TestHostCaps checks that a privileged container, or one adding ALL, gets
// only the capabilities staticlet holds: asking runc for more fails the
// start on a host that withholds some (CAP_SYS_RESOURCE, say).
func TestHostCaps(t *testing.T) {
	host := CapsFromMask(1<<0 | 1<<12 | 1<<21) // CHOWN, NET_ADMIN, SYS_ADMIN
	if want := []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_SYS_ADMIN"}; !slices.Equal(host, want) {
		t.Fatalf("CapsFromMask = %v, want %v", host, want)
	}
	tests := []struct {
		name string
		sc   string
		want []string
	}{
		{"privileged", "privileged: true", host},
		{"add ALL", "capabilities: {add: [ALL]}", sortedCaps(append(slices.Clone(defaultCaps), "CAP_NET_ADMIN", "CAP_SYS_ADMIN"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: busybox
    command: [sh]
    securityContext: {`+tt.sc+`}
`)
			s, err := Container(p, &p.Spec.Containers[0], ContainerOptions{HostCaps: host})
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedCaps(s.Process.Capabilities.Bounding); !slices.Equal(got, sortedCaps(tt.want)) {
				t.Errorf("bounding = %v, want %v", got, tt.want)
			}
		})
	}
}
