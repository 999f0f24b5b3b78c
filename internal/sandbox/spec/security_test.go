package spec

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

func TestSysctls(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		hostNet bool // set after decoding, past validation, which refuses it with net sysctls
		allow   []string
		want    map[string]string
		wantErr string
	}{
		{"none", "", false, nil, nil, ""},
		{"safe", "  securityContext:\n    sysctls: [{name: net.ipv4.ip_local_port_range, value: '1024 2048'}, {name: kernel.shm_rmid_forced, value: '1'}]\n", false, nil,
			map[string]string{"net.ipv4.ip_local_port_range": "1024 2048", "kernel.shm_rmid_forced": "1"}, ""},
		{"unsafe refused", "  securityContext:\n    sysctls: [{name: net.core.somaxconn, value: '1024'}]\n", false, nil, nil, "not in the safe set"},
		{"unsafe allowed by pattern", "  securityContext:\n    sysctls: [{name: net.core.somaxconn, value: '1024'}]\n", false, []string{"net.core.*"},
			map[string]string{"net.core.somaxconn": "1024"}, ""},
		{"not namespaced", "  securityContext:\n    sysctls: [{name: vm.swappiness, value: '1'}]\n", false, []string{"vm.*"}, nil, "not namespaced"},
		{"net sysctl on the host network", "  securityContext:\n    sysctls: [{name: net.ipv4.tcp_syncookies, value: '1'}]\n", true, nil, nil, "host's network namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := decodePod(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n"+tt.spec+"  containers:\n  - name: c\n    image: busybox\n")
			p.Spec.HostNetwork = tt.hostNet
			allow := func(name string) bool {
				for _, a := range tt.allow {
					if strings.HasPrefix(name, strings.TrimSuffix(a, "*")) {
						return true
					}
				}
				return false
			}
			got, err := Sysctls(p, allow)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Sysctls() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Sysctls() = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("Sysctls()[%s] = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestSecurityOptions(t *testing.T) {
	const localhost = `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}`
	tests := []struct {
		name    string
		podSpec string // extra pod spec fields, indented by two spaces
		podSC   string
		ctrSC   string
		// unmasked sets procMount Unmasked after decoding, past
		// validation, which refuses it (it needs hostUsers: false, which
		// staticlet refuses).
		unmasked bool
		check    func(t *testing.T, s *specs.Spec)
		wantErr  string
	}{
		{name: "no seccomp by default", check: func(t *testing.T, s *specs.Spec) {
			if s.Linux.Seccomp != nil {
				t.Errorf("seccomp set without a profile asked for")
			}
		}},
		{name: "RuntimeDefault from the pod", podSC: "seccompProfile: {type: RuntimeDefault}", check: func(t *testing.T, s *specs.Spec) {
			if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
				t.Errorf("seccomp = %+v, want containerd's default profile", s.Linux.Seccomp)
			}
		}},
		{name: "container Unconfined over pod RuntimeDefault", podSC: "seccompProfile: {type: RuntimeDefault}", ctrSC: "seccompProfile: {type: Unconfined}",
			check: func(t *testing.T, s *specs.Spec) {
				if s.Linux.Seccomp != nil {
					t.Errorf("seccomp set for Unconfined")
				}
			}},
		{name: "privileged is unconfined", podSC: "seccompProfile: {type: RuntimeDefault}", ctrSC: "privileged: true",
			check: func(t *testing.T, s *specs.Spec) {
				if s.Linux.Seccomp != nil {
					t.Errorf("seccomp set for a privileged container")
				}
			}},
		{name: "Localhost", ctrSC: "seccompProfile: {type: Localhost, localhostProfile: my.json}", check: func(t *testing.T, s *specs.Spec) {
			if s.Linux.Seccomp == nil || len(s.Linux.Seccomp.Syscalls) != 1 || s.Linux.Seccomp.Syscalls[0].Names[0] != "read" {
				t.Errorf("seccomp = %+v, want the Localhost profile", s.Linux.Seccomp)
			}
		}},
		{name: "runAsNonRoot with a root image", podSC: "runAsNonRoot: true", wantErr: "runAsNonRoot"},
		{name: "runAsNonRoot with runAsUser", podSC: "runAsNonRoot: true", ctrSC: "runAsUser: 1000", check: func(t *testing.T, s *specs.Spec) {
			if s.Process.User.UID != 1000 {
				t.Errorf("uid %d, want 1000", s.Process.User.UID)
			}
		}},
		{name: "container runAsNonRoot false overrides the pod", podSC: "runAsNonRoot: true", ctrSC: "runAsNonRoot: false"},
		{name: "fsGroup joins the groups", podSC: "fsGroup: 2000\n    supplementalGroups: [3000]", check: func(t *testing.T, s *specs.Spec) {
			if !slices.Equal(s.Process.User.AdditionalGids, []uint32{3000, 2000}) {
				t.Errorf("groups = %v, want [3000 2000]", s.Process.User.AdditionalGids)
			}
		}},
		{name: "procMount Unmasked", unmasked: true, check: func(t *testing.T, s *specs.Spec) {
			if len(s.Linux.MaskedPaths) != 0 || len(s.Linux.ReadonlyPaths) != 0 {
				t.Errorf("masked %v, read-only %v: want none", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n" + tt.podSpec
			if tt.podSC != "" {
				y += "  securityContext:\n    " + tt.podSC + "\n"
			}
			y += "  containers:\n  - name: c\n    image: busybox\n    command: [sh]\n"
			if tt.ctrSC != "" {
				y += "    securityContext:\n      " + tt.ctrSC + "\n"
			}
			p := decodePod(t, y)
			if tt.unmasked {
				unmasked := v1.UnmaskedProcMount
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &unmasked}
			}
			s, err := Container(p, &p.Spec.Containers[0], ContainerOptions{LocalhostSeccomp: []byte(localhost)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Container() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}
