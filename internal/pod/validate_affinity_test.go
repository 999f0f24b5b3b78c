package pod

import (
	"strings"
	"testing"
)

// TestValidateScheduling checks node and pod affinity, topology spread
// constraints and the toleration operators behind a feature gate: the
// rules the differential test (test/apidiff) found missing.
func TestValidateScheduling(t *testing.T) {
	required := func(expr string) string {
		return podWith("  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: ["+expr+"]\n", "")
	}
	podTerm := func(term string) string {
		return podWith("  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution: ["+term+"]\n", "")
	}
	spread := func(cs string) string { return podWith("  topologySpreadConstraints: ["+cs+"]\n", "") }
	const reqPath = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
	runValidateCases(t, []validateCase{
		{"node affinity", "ValidateNodeSelectorRequirement: a valid In", required("{key: kubernetes.io/os, operator: In, values: [linux]}"), nil},
		{"node affinity bad operator", "ValidateNodeSelectorRequirement: a known operator",
			required("{key: a, operator: Bogus}"), []string{reqPath + `.operator: Invalid value: "Bogus": not a valid selector operator`}},
		{"node affinity In without values", "ValidateNodeSelectorRequirement: In needs values",
			required("{key: a, operator: In}"), []string{reqPath + ".values: Required value"}},
		{"node affinity Exists with values", "ValidateNodeSelectorRequirement: Exists takes no values",
			required("{key: a, operator: Exists, values: [b]}"), []string{reqPath + ".values: Forbidden"}},
		{"node affinity Gt with two values", "ValidateNodeSelectorRequirement: Gt takes one value",
			required("{key: a, operator: Gt, values: ['1', '2']}"), []string{reqPath + ".values: Required value"}},
		{"node affinity bad key", "ValidateNodeSelectorRequirement: the key is a label name",
			required("{key: 'a b', operator: Exists}"), []string{reqPath + ".key: Invalid value"}},
		{"node affinity bad value", "ValidateNodeSelectorRequirement: required terms take label values",
			required("{key: a, operator: In, values: ['a b']}"), []string{reqPath + ".values[0]: Invalid value"}},
		{"node affinity no terms", "ValidateNodeSelector: at least one term",
			podWith("  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: []\n", ""),
			[]string{"nodeSelectorTerms: Required value"}},
		{"node affinity field other than the name", "ValidateNodeFieldSelectorRequirement: only metadata.name",
			podWith("  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields: [{key: metadata.labels, operator: In, values: [a]}]\n", ""),
			[]string{`matchFields[0].key: Invalid value: "metadata.labels": not a valid field selector key`}},
		{"preferred weight 0", "ValidatePreferredSchedulingTerms: weight 1-100",
			podWith("  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n      - {weight: 0, preference: {matchExpressions: [{key: a, operator: Exists}]}}\n", ""),
			[]string{"preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"}},
		{"pod anti-affinity", "validatePodAffinityTerm: a valid term", podTerm("{labelSelector: {matchLabels: {app: web}}, topologyKey: zone}"), nil},
		{"pod anti-affinity without topology key", "validatePodAffinityTerm: topologyKey is required",
			podTerm("{labelSelector: {matchLabels: {app: web}}}"), []string{"requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value"}},
		{"pod anti-affinity bad selector", "ValidatePodAffinityTermSelector: label selector keys",
			podTerm("{labelSelector: {matchLabels: {'a b': web}}, topologyKey: zone}"), []string{"labelSelector.matchLabels: Invalid value"}},
		{"pod anti-affinity bad namespace", "validatePodAffinityTerm: namespaces are DNS labels",
			podTerm("{topologyKey: zone, namespaces: [Bad_NS]}"), []string{`[0].namespace: Invalid value: "Bad_NS"`}},
		{"pod anti-affinity match keys without selector", "ValidateMatchLabelKeysAndMismatchLabelKeys: only with a labelSelector",
			podTerm("{topologyKey: zone, matchLabelKeys: [app]}"), []string{"matchLabelKeys: Forbidden"}},
		{"pod anti-affinity key in both lists", "ValidateMatchLabelKeysAndMismatchLabelKeys: not in both lists",
			podTerm("{topologyKey: zone, labelSelector: {}, matchLabelKeys: [app], mismatchLabelKeys: [app]}"), []string{"matchLabelKeys[0]: Invalid value"}},
		{"spread", "validateTopologySpreadConstraints: a valid constraint",
			spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}"), nil},
		{"spread skew 0", "validateTopologySpreadConstraints: maxSkew > 0",
			spread("{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"), []string{"spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0"}},
		{"spread without key", "ValidateTopologyKey: required",
			spread("{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}"), []string{"spec.topologySpreadConstraints[0].topologyKey: Required value"}},
		{"spread unknown action", "ValidateWhenUnsatisfiable: DoNotSchedule or ScheduleAnyway",
			spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Bogus}"), []string{"whenUnsatisfiable: Unsupported value"}},
		{"spread twice", "ValidateSpreadConstraintNotRepeat: one per key and action",
			spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"),
			[]string{"spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value"}},
		{"spread minDomains with ScheduleAnyway", "validateMinDomains: only with DoNotSchedule",
			spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}"), []string{"minDomains: Invalid value: 2"}},
		{"spread unknown policy", "validateNodeInclusionPolicy: Honor or Ignore",
			spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Bogus}"), []string{"nodeTaintsPolicy: Unsupported value"}},
		{"toleration Gt", "ValidateTolerations: Gt and Lt only with TaintTolerationComparisonOperators, off by default",
			podWith("  tolerations: [{key: cores, operator: Gt, value: '5'}]\n", ""), []string{`spec.tolerations[0].operator: Unsupported value: "Gt"`}},
	})
}

// TestValidateMetaAndHost checks finalizers, the serviceAccount alias,
// host process containers, hostnameOverride and stopSignal.
func TestValidateMetaAndHost(t *testing.T) {
	withMeta := func(meta string) string {
		return strings.Replace(podWith("", ""), "  name: web\n", "  name: web\n"+meta, 1)
	}
	runValidateCases(t, []validateCase{
		{"qualified finalizer", "validateKubeFinalizerName: a domain-prefixed name", withMeta("  finalizers: [example.com/cleanup]\n"), nil},
		{"standard finalizer", "validateKubeFinalizerName: a standard name without a domain", withMeta("  finalizers: [kubernetes]\n"), nil},
		{"unqualified finalizer", "validateKubeFinalizerName: other names need a domain",
			withMeta("  finalizers: [cleanup]\n"), []string{`metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`}},
		{"bad finalizer", "ValidateFinalizerName: a qualified name",
			withMeta("  finalizers: ['bad finalizer!']\n"), []string{"metadata.finalizers: Invalid value"}},
		{"both dependents policies", "ValidateFinalizers: orphan and foreground exclude each other",
			withMeta("  finalizers: [orphan, foregroundDeletion]\n"), []string{"metadata.finalizers: Invalid value", "cannot be both set"}},
		{"serviceAccount alias", "SetDefaults_PodSpec: serviceAccount fills serviceAccountName",
			podWith("  serviceAccount: Bad_Name\n", ""), []string{`spec.serviceAccountName: Invalid value: "Bad_Name"`}},
		{"serviceAccount alias differs", "SetDefaults_PodSpec: serviceAccountName wins over the alias",
			podWith("  serviceAccount: Bad_Name\n  serviceAccountName: web\n", ""), nil},
		{"hostProcess without host network", "validateWindowsHostProcessPod: hostNetwork is required",
			podWith("", "    securityContext:\n      windowsOptions: {hostProcess: true}\n"),
			[]string{"spec.hostNetwork: Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers"}},
		{"hostProcess in one container", "validateWindowsHostProcessPod: all containers or none",
			podWith("  hostNetwork: true\n  initContainers:\n  - name: init\n    image: busybox\n", "    securityContext:\n      windowsOptions: {hostProcess: true}\n"),
			[]string{"spec: Invalid value", "all containers must be HostProcess containers"}},
		{"hostProcess disagrees with the pod", "validateWindowsHostProcessPod: pod and container agree",
			podWith("  hostNetwork: true\n  securityContext:\n    windowsOptions: {hostProcess: true}\n", "    securityContext:\n      windowsOptions: {hostProcess: false}\n"),
			[]string{"spec.containers[0].securityContext.windowsOptions.hostProcess: Invalid value: false"}},
		{"hostnameOverride", "validatePodHostName: a DNS subdomain", podWith("  hostnameOverride: my-host.example\n", ""), nil},
		{"hostnameOverride with host network", "validatePodHostName: not with hostNetwork",
			podWith("  hostNetwork: true\n  hostnameOverride: my-host\n", ""), []string{"spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true"}},
		{"hostnameOverride with FQDN", "validatePodHostName: not with setHostnameAsFQDN",
			podWith("  setHostnameAsFQDN: true\n  hostnameOverride: my-host\n", ""), []string{"spec.hostnameOverride: Forbidden"}},
		{"hostnameOverride bad", "validatePodHostName: a DNS subdomain",
			podWith("  hostnameOverride: Bad_Host\n", ""), []string{`spec.hostnameOverride: Invalid value: "Bad_Host"`}},
		{"stopSignal without os", "validateStopSignal: spec.os.name says which signals there are",
			podWith("", "    lifecycle: {stopSignal: SIGUSR1}\n"), []string{"spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"}},
		{"stopSignal on linux", "validateStopSignal: a Linux signal, real-time ones too",
			podWith("  os: {name: linux}\n", "    lifecycle: {stopSignal: SIGRTMAX-3}\n"), nil},
		{"stopSignal unknown", "validateStopSignal: a Linux signal",
			podWith("  os: {name: linux}\n", "    lifecycle: {stopSignal: SIGBOGUS}\n"), []string{`spec.containers[0].lifecycle.stopSignal: Unsupported value: "SIGBOGUS"`}},
	})
}
