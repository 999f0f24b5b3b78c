package pod

import "testing"

// TestValidateCrossField checks the rules that tie one field to another.
func TestValidateCrossField(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"shareProcessNamespace with hostPID", "validatePodSpecSecurityContext: shareProcessNamespace and hostPID cannot both be true",
			podWith("  hostPID: true\n  shareProcessNamespace: true\n", ""),
			[]string{"spec.shareProcessNamespace: Invalid value: true: may not be true when hostPID is true"}},
		{"shareProcessNamespace alone", "validatePodSpecSecurityContext: either alone is fine",
			podWith("  hostPID: false\n  shareProcessNamespace: true\n", ""), nil},
		{"no privilege escalation but privileged", "ValidateSecurityContext: allowPrivilegeEscalation false with privileged true",
			podWith("", "    securityContext:\n      privileged: true\n      allowPrivilegeEscalation: false\n"),
			[]string{"spec.containers[0].securityContext.allowPrivilegeEscalation: Invalid value: false: may not be false when privileged is true"}},
		{"no privilege escalation but CAP_SYS_ADMIN", "ValidateSecurityContext: allowPrivilegeEscalation false with CAP_SYS_ADMIN added",
			podWith("", "    securityContext:\n      allowPrivilegeEscalation: false\n      capabilities: {add: [NET_ADMIN, CAP_SYS_ADMIN]}\n"),
			[]string{`spec.containers[0].securityContext.capabilities.add[1]: Invalid value: "CAP_SYS_ADMIN"`}},
		{"no privilege escalation, unprivileged", "ValidateSecurityContext: allowPrivilegeEscalation false is fine otherwise",
			podWith("", "    securityContext:\n      privileged: false\n      allowPrivilegeEscalation: false\n      capabilities: {add: [NET_ADMIN]}\n"), nil},
		{"seccomp Localhost without profile", "validateSeccompProfileField: localhostProfile is required with type Localhost",
			podWith("  securityContext:\n    seccompProfile: {type: Localhost}\n", ""),
			[]string{"spec.securityContext.seccompProfile.localhostProfile: Required value"}},
		{"seccomp profile without Localhost", "validateSeccompProfileField: localhostProfile only with type Localhost",
			podWith("", "    securityContext:\n      seccompProfile: {type: RuntimeDefault, localhostProfile: web.json}\n"),
			[]string{`spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "web.json": may be set only when type is Localhost`}},
		{"appArmor Localhost without profile", "ValidateAppArmorProfileField: localhostProfile is required with type Localhost",
			podWith("", "    securityContext:\n      appArmorProfile: {type: Localhost}\n"),
			[]string{"spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value"}},
		{"appArmor profile without Localhost", "ValidateAppArmorProfileField: localhostProfile only with type Localhost",
			podWith("  securityContext:\n    appArmorProfile: {type: Unconfined, localhostProfile: web}\n", ""),
			[]string{"spec.securityContext.appArmorProfile.localhostProfile: Invalid value"}},
		{"procMount Unmasked in the host user namespace", "ValidateSecurityContext: Unmasked needs hostUsers false",
			podWith("", "    securityContext:\n      procMount: Unmasked\n"),
			[]string{`spec.containers[0].securityContext.procMount: Invalid value: "Unmasked": may be Unmasked only when hostUsers is false`}},
		{"procMount Unmasked in a pod user namespace", "ValidateSecurityContext: Unmasked with hostUsers false",
			podWith("  hostUsers: false\n", "    securityContext:\n      procMount: Unmasked\n"), nil},
		{"hostUsers false with host namespaces", "validateHostUsers: no hostNetwork, hostPID or hostIPC with hostUsers false",
			podWith("  hostUsers: false\n  hostNetwork: true\n  hostPID: true\n  hostIPC: true\n", ""),
			[]string{"spec.hostNetwork: Forbidden", "spec.hostPID: Forbidden", "spec.hostIPC: Forbidden"}},
		{"net sysctl with hostNetwork", "ValidateHostSysctl: no net.* sysctl when hostNetwork is true",
			podWith("  hostNetwork: true\n  securityContext:\n    sysctls: [{name: net.ipv4.ip_local_port_range, value: '1024 2048'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Invalid value", "may not be set when hostNetwork is true"}},
		{"net sysctl with slashes and hostNetwork", "ValidateHostSysctl: the '/' form names the same sysctl",
			podWith("  hostNetwork: true\n  securityContext:\n    sysctls: [{name: net/ipv4/ip_local_port_range, value: '1024 2048'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Invalid value", "may not be set when hostNetwork is true"}},
		{"IPC sysctl with hostIPC", "ValidateHostSysctl: no IPC sysctl when hostIPC is true",
			podWith("  hostIPC: true\n  securityContext:\n    sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Invalid value", "may not be set when hostIPC is true"}},
		{"IPC sysctl with hostNetwork", "ValidateHostSysctl: an IPC sysctl is fine on the host network",
			podWith("  hostNetwork: true\n  securityContext:\n    sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]\n", ""), nil},
		{"windowsOptions on a linux pod", "validateLinux: no windowsOptions when os.name is linux",
			podWith("  os: {name: linux}\n  securityContext:\n    windowsOptions: {runAsUserName: web}\n", "    securityContext:\n      windowsOptions: {runAsUserName: web}\n"),
			[]string{"spec.securityContext.windowsOptions: Forbidden", "spec.containers[0].securityContext.windowsOptions: Forbidden"}},
		{"seccomp annotation disagrees with field", "validateSeccompAnnotationsAndFields: annotation and field agree when both are set",
			annotatedWith("seccomp.security.alpha.kubernetes.io/pod: unconfined", "  securityContext:\n    seccompProfile: {type: RuntimeDefault}\n", ""),
			[]string{"spec.securityContext.seccompProfile: Forbidden: must agree with the seccomp annotation (unconfined)"}},
		{"container seccomp annotation agrees", "validateSeccompAnnotationsAndFields: a matching pair is fine",
			annotatedWith("container.seccomp.security.alpha.kubernetes.io/web: localhost/web.json", "", "    securityContext:\n      seccompProfile: {type: Localhost, localhostProfile: web.json}\n"), nil},
		{"appArmor annotation disagrees with field", "validateAppArmorAnnotationsAndFieldsMatchOnCreate: annotation and field agree when both are set",
			annotatedWith("container.apparmor.security.beta.kubernetes.io/web: runtime/default", "  securityContext:\n    appArmorProfile: {type: Unconfined}\n", ""),
			[]string{"spec.containers[0].securityContext.appArmorProfile: Forbidden: must agree with the AppArmor annotation (runtime/default)"}},
	})
}

// annotatedWith is podWith with one annotation line added.
func annotatedWith(annotation, spec, container string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    " + annotation + "\nspec:\n" + spec +
		"  containers:\n  - name: web\n    image: nginx:1.27\n" + container
}
