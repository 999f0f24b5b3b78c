package pod

import "testing"

// TestValidateNames checks the syntax the apiserver requires of names,
// paths and addresses.
func TestValidateNames(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"sysctl name not a sysctl", "validateSysctls: a name matches the sysctl name regexp (IsValidSysctlName)",
			podWith("  securityContext:\n    sysctls: [{name: 'net.ipv4.tcp syncookies', value: '1'}]\n", ""),
			[]string{`spec.securityContext.sysctls[0].name: Invalid value: "net.ipv4.tcp syncookies": must be a sysctl name`}},
		{"sysctl name upper case", "validateSysctls: segments are lower case",
			podWith("  securityContext:\n    sysctls: [{name: Net.Core.Somaxconn, value: '1'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Invalid value"}},
		{"sysctl name trailing dot", "validateSysctls: a segment ends with a letter or digit",
			podWith("  securityContext:\n    sysctls: [{name: kernel.shm_rmid_forced., value: '1'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Invalid value"}},
		{"sysctl name too long", "validateSysctls: at most 253 characters",
			podWith("  securityContext:\n    sysctls: [{name: net."+longSegments(250)+", value: '1'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Invalid value"}},
		{"sysctl name empty", "validateSysctls: a name is required",
			podWith("  securityContext:\n    sysctls: [{name: '', value: '1'}]\n", ""),
			[]string{"spec.securityContext.sysctls[0].name: Required value"}},
		{"sysctl names with dots and slashes", "validateSysctls: '.' or '/' separate segments; '-' and '_' inside one",
			podWith("  securityContext:\n    sysctls:\n    - {name: net.ipv4.ip_local_port_range, value: '1024 2048'}\n    - {name: net/ipv4/conf/eth0.100/forwarding, value: '1'}\n    - {name: kernel.shm_rmid_forced, value: '1'}\n", ""), nil},
		{"sysctl duplicate", "validateSysctls: each name once",
			podWith("  securityContext:\n    sysctls: [{name: kernel.shm_rmid_forced, value: '1'}, {name: kernel.shm_rmid_forced, value: '0'}]\n", ""),
			[]string{`spec.securityContext.sysctls[1].name: Duplicate value: "kernel.shm_rmid_forced"`}},
		{"seccomp localhostProfile escaping", "validateSeccompProfileField: localhostProfile is a local descending path (validateLocalDescendingPath)",
			podWith("  securityContext:\n    seccompProfile: {type: Localhost, localhostProfile: ../etc/shadow}\n", ""),
			[]string{"spec.securityContext.seccompProfile.localhostProfile: Invalid value", "must not contain '..'"}},
		{"seccomp localhostProfile absolute", "validateSeccompProfileField: localhostProfile is relative to the kubelet's seccomp directory",
			podWith("", "    securityContext:\n      seccompProfile: {type: Localhost, localhostProfile: /etc/profile.json}\n"),
			[]string{"spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value", "must be a relative path"}},
		{"appArmor localhostProfile padded", "ValidateAppArmorProfileField: localhostProfile is not padded with whitespace",
			podWith("", "    securityContext:\n      appArmorProfile: {type: Localhost, localhostProfile: ' my-profile'}\n"),
			[]string{"spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value", "whitespace"}},
		{"appArmor annotation for no container", "ValidateAppArmorPodAnnotations: the annotation names a container of the pod",
			annotatedWith("container.apparmor.security.beta.kubernetes.io/nope: runtime/default", "", ""),
			[]string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/nope]: Invalid value"}},
		{"appArmor annotation value", "ValidateAppArmorProfileFormat: runtime/default, unconfined or localhost/<name>",
			annotatedWith("container.apparmor.security.beta.kubernetes.io/web: strict", "", ""),
			[]string{`metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Invalid value: "strict"`}},
		{"seccomp annotation value", "ValidateSeccompPodAnnotations: a known profile or localhost/<path>",
			annotatedWith("seccomp.security.alpha.kubernetes.io/pod: strict", "", ""),
			[]string{`metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: Invalid value: "strict"`}},
		{"security annotations valid", "ValidateSeccompPodAnnotations, ValidateAppArmorPodAnnotations: the valid forms",
			annotatedWith("seccomp.security.alpha.kubernetes.io/pod: runtime/default\n    container.seccomp.security.alpha.kubernetes.io/web: localhost/profiles/web.json\n    container.apparmor.security.beta.kubernetes.io/web: localhost/web", "", ""), nil},
		{"pod-deletion-cost not an int32", "ValidatePodSpecificAnnotations: pod-deletion-cost is a 32-bit integer",
			annotatedWith("controller.kubernetes.io/pod-deletion-cost: '2147483648'", "", ""),
			[]string{"metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value"}},
	})
}

// longSegments returns n characters of valid sysctl segments.
func longSegments(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
		if i%10 == 9 && i < n-1 {
			b[i] = '.'
		}
	}
	return string(b)
}
