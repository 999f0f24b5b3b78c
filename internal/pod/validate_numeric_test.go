package pod

import "testing"

// TestValidateNumericRanges checks the ranges the apiserver puts on numbers.
func TestValidateNumericRanges(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"pod runAsUser negative", "validatePodSpecSecurityContext: runAsUser is a 31-bit UID (IsValidUserID)",
			podWith("  securityContext:\n    runAsUser: -1\n", ""),
			[]string{"spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"}},
		{"pod runAsUser above int32", "validatePodSpecSecurityContext: runAsUser is a 31-bit UID (IsValidUserID)",
			podWith("  securityContext:\n    runAsUser: 2147483648\n", ""),
			[]string{"spec.securityContext.runAsUser: Invalid value: 2147483648"}},
		{"pod runAsUser at the bounds", "validatePodSpecSecurityContext: 0 and 2^31-1 are valid IDs",
			podWith("  securityContext:\n    runAsUser: 2147483647\n    runAsGroup: 0\n    fsGroup: 2147483647\n    supplementalGroups: [0, 2147483647]\n", ""), nil},
		{"pod runAsGroup negative", "validatePodSpecSecurityContext: runAsGroup is a 31-bit GID (IsValidGroupID)",
			podWith("  securityContext:\n    runAsGroup: -5\n", ""),
			[]string{"spec.securityContext.runAsGroup: Invalid value: -5"}},
		{"fsGroup negative", "validatePodSpecSecurityContext: fsGroup is a 31-bit GID (IsValidGroupID)",
			podWith("  securityContext:\n    fsGroup: -1\n", ""),
			[]string{"spec.securityContext.fsGroup: Invalid value: -1"}},
		{"supplementalGroups negative", "validatePodSpecSecurityContext: each supplementalGroup is a 31-bit GID (IsValidGroupID)",
			podWith("  securityContext:\n    supplementalGroups: [10, -1]\n", ""),
			[]string{"spec.securityContext.supplementalGroups[1]: Invalid value: -1"}},
		{"container runAsUser negative", "ValidateSecurityContext: runAsUser is a 31-bit UID (IsValidUserID)",
			podWith("", "    securityContext:\n      runAsUser: -1\n"),
			[]string{"spec.containers[0].securityContext.runAsUser: Invalid value: -1"}},
		{"container runAsGroup above int32", "ValidateSecurityContext: runAsGroup is a 31-bit GID (IsValidGroupID)",
			podWith("", "    securityContext:\n      runAsGroup: 4294967295\n"),
			[]string{"spec.containers[0].securityContext.runAsGroup: Invalid value: 4294967295"}},
		{"init container runAsUser negative", "ValidateSecurityContext: applies to init containers too (validateContainerCommon)",
			podWith("  initContainers:\n  - name: init\n    image: busybox\n    securityContext:\n      runAsUser: -2\n", ""),
			[]string{"spec.initContainers[0].securityContext.runAsUser: Invalid value: -2"}},
	})
}
