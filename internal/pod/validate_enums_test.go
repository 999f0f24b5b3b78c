package pod

import "testing"

// TestValidateEnums checks that fields with a fixed set of values take only
// those.
func TestValidateEnums(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"seccomp type unknown", "validateSeccompProfileType: Localhost, RuntimeDefault or Unconfined",
			podWith("  securityContext:\n    seccompProfile: {type: Strict}\n", ""),
			[]string{`spec.securityContext.seccompProfile.type: Unsupported value: "Strict"`}},
		{"seccomp type missing", "validateSeccompProfileType: type is required",
			podWith("", "    securityContext:\n      seccompProfile: {}\n"),
			[]string{"spec.containers[0].securityContext.seccompProfile.type: Required value"}},
		{"seccomp every type", "validateSeccompProfileType: the three types",
			podWith("  securityContext:\n    seccompProfile: {type: RuntimeDefault}\n", "    securityContext:\n      seccompProfile: {type: Localhost, localhostProfile: profiles/web.json}\n"), nil},
		{"appArmor type unknown", "ValidateAppArmorProfileField: Localhost, RuntimeDefault or Unconfined",
			podWith("  securityContext:\n    appArmorProfile: {type: Strict}\n", ""),
			[]string{`spec.securityContext.appArmorProfile.type: Unsupported value: "Strict"`}},
		{"appArmor type missing", "ValidateAppArmorProfileField: type is required",
			podWith("  securityContext:\n    appArmorProfile: {}\n", ""),
			[]string{"spec.securityContext.appArmorProfile.type: Required value"}},
		{"procMount unknown", "ValidateProcMountType: Default or Unmasked",
			podWith("", "    securityContext:\n      procMount: Masked\n"),
			[]string{`spec.containers[0].securityContext.procMount: Unsupported value: "Masked"`}},
		{"procMount Default", "ValidateProcMountType: Default is always allowed",
			podWith("", "    securityContext:\n      procMount: Default\n"), nil},
		{"fsGroupChangePolicy unknown", "validateFSGroupChangePolicy: OnRootMismatch or Always",
			podWith("  securityContext:\n    fsGroupChangePolicy: Never\n", ""),
			[]string{`spec.securityContext.fsGroupChangePolicy: Unsupported value: "Never"`}},
		{"supplementalGroupsPolicy unknown", "validateSupplementalGroupsPolicy: Merge or Strict",
			podWith("  securityContext:\n    supplementalGroupsPolicy: Replace\n", ""),
			[]string{`spec.securityContext.supplementalGroupsPolicy: Unsupported value: "Replace"`}},
		{"seLinuxChangePolicy unknown", "validateSELinuxChangePolicy: Recursive or MountOption",
			podWith("  securityContext:\n    seLinuxChangePolicy: Never\n", ""),
			[]string{`spec.securityContext.seLinuxChangePolicy: Unsupported value: "Never"`}},
		{"security policies valid", "validatePodSpecSecurityContext: the known values",
			podWith("  securityContext:\n    fsGroup: 2000\n    fsGroupChangePolicy: OnRootMismatch\n    supplementalGroupsPolicy: Strict\n    seLinuxChangePolicy: MountOption\n", ""), nil},
		{"os name unknown", "validateOS: linux or windows",
			podWith("  os: {name: plan9}\n", ""),
			[]string{`spec.os.name: Unsupported value: "plan9"`}},
		{"os name windows", "kubelet admission refuses a pod whose os is not the node's (staticlet runs Linux)",
			podWith("  os: {name: windows}\n", ""),
			[]string{"spec.os.name: staticlet runs Linux containers"}},
		{"os name linux", "validateOS: linux",
			podWith("  os: {name: linux}\n", ""), nil},
	})
}
