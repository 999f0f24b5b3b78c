package pod

import "testing"

// TestValidateVolumes checks what staticlet accepts of volumes and their
// mounts, and that what needs an apiserver is refused with the reason.
func TestValidateVolumes(t *testing.T) {
	tests := []validateCase{
		{"hostPath every type", "", podWith("  volumes:\n"+
			"  - {name: a, hostPath: {path: /a}}\n"+
			"  - {name: b, hostPath: {path: /b, type: \"\"}}\n"+
			"  - {name: c, hostPath: {path: /c, type: DirectoryOrCreate}}\n"+
			"  - {name: d, hostPath: {path: /d, type: Directory}}\n"+
			"  - {name: e, hostPath: {path: /e, type: FileOrCreate}}\n"+
			"  - {name: f, hostPath: {path: /f, type: File}}\n"+
			"  - {name: g, hostPath: {path: /g, type: Socket}}\n"+
			"  - {name: h, hostPath: {path: /h, type: CharDevice}}\n"+
			"  - {name: i, hostPath: {path: /i, type: BlockDevice}}\n", ""), nil},
		{"emptyDir Memory with sizeLimit", "", podWith("  volumes:\n  - name: m\n    emptyDir: {medium: Memory, sizeLimit: 8Mi}\n", ""), nil},
		{"emptyDir sizeLimit negative", "", podWith("  volumes:\n  - name: s\n    emptyDir: {sizeLimit: -1Mi}\n", ""),
			[]string{`spec.volumes[0].emptyDir.sizeLimit: Invalid value: "-1Mi": must be greater than or equal to 0`}},
		{"ephemeral-storage limit negative", "", podWith("", "    resources:\n      limits: {ephemeral-storage: -1Mi}\n"),
			[]string{`spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: "-1Mi": must be greater than or equal to 0`}},
		{"emptyDir HugePages without a request", "kubelet emptydir getPageSizeMountOption: the pod requests the size",
			podWith("  volumes:\n  - name: m\n    emptyDir: {medium: HugePages-2Mi}\n", ""),
			[]string{`spec.volumes[0].emptyDir.medium: Invalid value: "HugePages-2Mi": medium HugePages-2Mi: hugePages storage requested, but there is no resource request for huge pages`}},
		{"emptyDir HugePages of another size", "kubelet emptydir getPageSizeMountOption: the pod requests the size",
			podWith("  volumes:\n  - name: m\n    emptyDir: {medium: HugePages-1Gi}\n", hugePagesRequest),
			[]string{`spec.volumes[0].emptyDir.medium: Invalid value: "HugePages-1Gi"`}},
		{"emptyDir HugePages of a requested size", "kubelet emptydir getPageSizeMountOption: a hugetlbfs of that page size",
			podWith("  volumes:\n  - name: m\n    emptyDir: {medium: HugePages-2Mi}\n  - name: h\n    emptyDir: {medium: HugePages}\n", hugePagesRequest), nil},
		{"emptyDir HugePages with two sizes", "kubelet emptydir getPageSizeMountOption: plain HugePages needs one size",
			podWith("  volumes:\n  - name: m\n    emptyDir: {medium: HugePages}\n  initContainers:\n  - name: i\n    image: busybox\n    resources:\n      limits: {memory: 1Gi, hugepages-1Gi: 1Gi}\n", hugePagesRequest),
			[]string{"spec.volumes[0].emptyDir.medium: Invalid value", "multiple huge page sizes"}},
		{"emptyDir medium", "", podWith("  volumes:\n  - name: m\n    emptyDir: {medium: Disk}\n", ""),
			[]string{"spec.volumes[0].emptyDir.medium: Unsupported value"}},
		{"downwardAPI every field", "", podWith("  volumes:\n  - name: d\n    downwardAPI:\n      defaultMode: 0600\n      items:\n"+
			"      - {path: name, fieldRef: {fieldPath: metadata.name}}\n"+
			"      - {path: ns, fieldRef: {fieldPath: metadata.namespace}}\n"+
			"      - {path: uid, fieldRef: {fieldPath: metadata.uid}}\n"+
			"      - {path: labels, fieldRef: {fieldPath: metadata.labels}}\n"+
			"      - {path: sub/annotations, mode: 0400, fieldRef: {fieldPath: metadata.annotations}}\n"+
			"      - {path: app, fieldRef: {fieldPath: \"metadata.labels['app']\"}}\n"+
			"      - {path: cpu, resourceFieldRef: {containerName: web, resource: limits.cpu, divisor: 1m}}\n", ""), nil},
		{"downwardAPI dot-dot name", "", podWith("  volumes:\n  - name: d\n    downwardAPI:\n      items:\n      - {path: ..data, fieldRef: {fieldPath: metadata.name}}\n", ""),
			[]string{"spec.volumes[0].downwardAPI.items[0].path: Invalid value", "must not start with '..'"}},
		{"downwardAPI env-only field", "", podWith("  volumes:\n  - name: d\n    downwardAPI:\n      items:\n      - {path: ip, fieldRef: {fieldPath: status.podIP}}\n", ""),
			[]string{"spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value"}},
		{"downwardAPI resource without container", "", podWith("  volumes:\n  - name: d\n    downwardAPI:\n      items:\n      - {path: cpu, resourceFieldRef: {resource: limits.cpu}}\n", ""),
			[]string{"spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: Required value"}},
		{"downwardAPI mode", "", podWith("  volumes:\n  - name: d\n    downwardAPI:\n      items:\n      - {path: name, mode: 01000, fieldRef: {fieldPath: metadata.name}}\n", ""),
			[]string{"spec.volumes[0].downwardAPI.items[0].mode: Invalid value"}},
		{"configMap volume", "", podWith("  volumes:\n  - name: c\n    configMap: {name: c}\n", ""),
			nil},
		{"secret volume", "", podWith("  volumes:\n  - name: s\n    secret: {secretName: s}\n", ""),
			nil},
		{"configMap volume items", "validateKeyToPath", podWith("  volumes:\n  - name: c\n    configMap:\n      name: c\n      defaultMode: 01000\n      items:\n      - {key: '', path: ../x}\n      - {key: k, path: ..data}\n      - {key: k, path: /abs, mode: -1}\n", ""),
			[]string{"spec.volumes[0].configMap.defaultMode: Invalid value: 512", "spec.volumes[0].configMap.items[0].key: Required value",
				"spec.volumes[0].configMap.items[0].path: Invalid value", "spec.volumes[0].configMap.items[1].path: Invalid value: \"..data\": must not start with '..'",
				"spec.volumes[0].configMap.items[2].path: Invalid value", "spec.volumes[0].configMap.items[2].mode: Invalid value: -1"}},
		{"secret volume without a name", "validateSecretVolumeSource", podWith("  volumes:\n  - name: s\n    secret: {optional: true}\n", ""),
			[]string{"spec.volumes[0].secret.secretName: Required value"}},
		{"projected volume of three sources", "validateProjectionSources", podWith("  volumes:\n  - name: p\n    projected:\n      defaultMode: 0400\n      sources:\n      - configMap: {name: c, items: [{key: a, path: a}]}\n      - secret: {name: s, items: [{key: b, path: b}]}\n      - downwardAPI: {items: [{path: podname, fieldRef: {fieldPath: metadata.name}}]}\n", ""),
			nil},
		{"projected volume duplicate paths", "validateProjectionSources", podWith("  volumes:\n  - name: p\n    projected:\n      sources:\n      - configMap: {name: c, items: [{key: a, path: x}]}\n      - secret: {name: s, items: [{key: b, path: x}]}\n", ""),
			[]string{"spec.volumes[0].projected.sources[1].secret.items[0]: Invalid value: \"x\": conflicting duplicate paths"}},
		{"projected source of two types", "validateProjectionSources", podWith("  volumes:\n  - name: p\n    projected:\n      sources:\n      - configMap: {name: c}\n        secret: {name: s}\n", ""),
			[]string{"spec.volumes[0].projected.sources[0]: Forbidden: may not specify more than 1 volume type per source"}},
		{"persistentVolumeClaim volume", "", podWith("  volumes:\n  - name: p\n    persistentVolumeClaim: {claimName: c}\n", ""),
			[]string{"spec.volumes[0].persistentVolumeClaim: persistentVolumeClaim volumes need an apiserver"}},
		{"projected volume", "", podWith("  volumes:\n  - name: p\n    projected:\n      sources:\n      - serviceAccountToken: {path: token}\n", ""),
			[]string{"spec.volumes[0].projected.sources[0].serviceAccountToken: service account tokens are issued by an apiserver; staticlet runs without one"}},
		{"ephemeral volume", "", podWith("  volumes:\n  - name: p\n    ephemeral:\n      volumeClaimTemplate:\n        spec: {accessModes: [ReadWriteOnce]}\n", ""),
			[]string{"spec.volumes[0].ephemeral: volume type ephemeral is not supported by staticlet"}},
		{"propagation HostToContainer", "", podWith("  volumes:\n  - {name: h, hostPath: {path: /h}}\n", "    volumeMounts:\n    - {name: h, mountPath: /h, mountPropagation: HostToContainer}\n"), nil},
		{"propagation None", "", podWith("  volumes:\n  - {name: h, hostPath: {path: /h}}\n", "    volumeMounts:\n    - {name: h, mountPath: /h, mountPropagation: None}\n"), nil},
		{"propagation Bidirectional privileged", "", podWith("  volumes:\n  - {name: h, hostPath: {path: /h}}\n",
			"    securityContext: {privileged: true}\n    volumeMounts:\n    - {name: h, mountPath: /h, mountPropagation: Bidirectional}\n"), nil},
		{"propagation Bidirectional unprivileged", "", podWith("  volumes:\n  - {name: h, hostPath: {path: /h}}\n", "    volumeMounts:\n    - {name: h, mountPath: /h, mountPropagation: Bidirectional}\n"),
			[]string{"spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"}},
		{"propagation unknown", "", podWith("  volumes:\n  - {name: h, hostPath: {path: /h}}\n", "    volumeMounts:\n    - {name: h, mountPath: /h, mountPropagation: Sideways}\n"),
			[]string{"spec.containers[0].volumeMounts[0].mountPropagation: Unsupported value"}},
		{"subPath escaping", "", podWith("  volumes:\n  - {name: h, hostPath: {path: /h}}\n", "    volumeMounts:\n    - {name: h, mountPath: /h, subPath: ../x}\n"),
			[]string{"spec.containers[0].volumeMounts[0].subPath: Invalid value"}},
	}
	runValidateCases(t, tests)
}

// hugePagesRequest is a container's request of 2 MiB huge pages.
const hugePagesRequest = "    resources:\n      limits: {memory: 64Mi, hugepages-2Mi: 4Mi}\n"
