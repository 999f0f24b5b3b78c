package apidiff

import "strings"

// additions are the fields added to every base manifest, one at a time:
// the pod spec fields that manifests commonly get wrong, each with a valid
// form beside the wrong ones, so that both verdicts are exercised.
func additions() []addition {
	const c0 = "spec.containers.0"
	return []addition{
		// Node and pod affinity.
		{"affinity", "node-in", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]}]}}}`},
		{"affinity", "node-bad-operator", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/os, operator: Bogus, values: [linux]}]}]}}}`},
		{"affinity", "node-in-no-values", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/os, operator: In}]}]}}}`},
		{"affinity", "node-exists-values", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/os, operator: Exists, values: [linux]}]}]}}}`},
		{"affinity", "node-bad-key", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: "bad key!", operator: Exists}]}]}}}`},
		{"affinity", "node-no-terms", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}`},
		{"affinity", "node-gt-two-values", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: cores, operator: Gt, values: ["1", "2"]}]}]}}}`},
		{"affinity", "node-field-bad", "spec.affinity", false, `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.labels, operator: In, values: [a]}]}]}}}`},
		{"affinity", "node-preferred-weight-0", "spec.affinity", false, `{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}`},
		{"affinity", "node-preferred-ok", "spec.affinity", false, `{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 10, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}`},
		{"affinity", "pod-ok", "spec.affinity", false, `{podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}]}}`},
		{"affinity", "pod-no-topology-key", "spec.affinity", false, `{podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: web}}}]}}`},
		{"affinity", "pod-bad-selector", "spec.affinity", false, `{podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {"bad key!": web}}, topologyKey: zone}]}}`},
		{"affinity", "pod-anti-weight-200", "spec.affinity", false, `{podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 200, podAffinityTerm: {topologyKey: zone}}]}}`},
		{"affinity", "pod-bad-namespace", "spec.affinity", false, `{podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, namespaces: ["Bad_NS"]}]}}`},
		{"affinity", "pod-matchlabelkeys-no-selector", "spec.affinity", false, `{podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, matchLabelKeys: [app]}]}}`},
		// Topology spread constraints.
		{"topologySpread", "ok", "spec.topologySpreadConstraints", false, `[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]`},
		{"topologySpread", "skew-0", "spec.topologySpreadConstraints", false, `[{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]`},
		{"topologySpread", "no-key", "spec.topologySpreadConstraints", false, `[{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]`},
		{"topologySpread", "bad-when", "spec.topologySpreadConstraints", false, `[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Bogus}]`},
		{"topologySpread", "min-domains-anyway", "spec.topologySpreadConstraints", false, `[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}]`},
		{"topologySpread", "duplicate", "spec.topologySpreadConstraints", false, `[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]`},
		{"topologySpread", "bad-policy", "spec.topologySpreadConstraints", false, `[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, nodeAffinityPolicy: Bogus}]`},
		// Tolerations.
		{"tolerations", "gt", "spec.tolerations", true, `{key: cores, operator: Gt, value: "5"}`},
		{"tolerations", "lt-text", "spec.tolerations", true, `{key: cores, operator: Lt, value: abc}`},
		{"tolerations", "exists-ok", "spec.tolerations", true, `{key: a, operator: Exists, effect: NoSchedule}`},
		{"tolerations", "seconds-noschedule", "spec.tolerations", true, `{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}`},
		// The deprecated serviceAccount alias.
		{"serviceAccount", "bad-name", "spec.serviceAccount", false, `Bad_Name`},
		{"serviceAccount", "ok", "spec.serviceAccount", false, `default`},
		{"serviceAccount", "differs", "spec.serviceAccountName", false, `other`},
		// Finalizers.
		{"finalizers", "qualified", "metadata.finalizers", false, `[example.com/cleanup]`},
		{"finalizers", "unqualified", "metadata.finalizers", false, `[cleanup]`},
		{"finalizers", "bad", "metadata.finalizers", false, `["bad finalizer!"]`},
		{"finalizers", "standard", "metadata.finalizers", false, `[kubernetes]`},
		{"metadata", "generate-name", "metadata.generateName", false, `web-`},
		{"metadata", "owner-ref", "metadata.ownerReferences", false, `[{apiVersion: v1, kind: Node, name: n, uid: "1"}]`},
		// Windows host process containers and the host name.
		{"hostProcess", "pod", "spec.securityContext", false, `{windowsOptions: {hostProcess: true}}`},
		{"hostProcess", "container", c0 + ".securityContext", false, `{windowsOptions: {hostProcess: true}}`},
		{"hostProcess", "false", c0 + ".securityContext", false, `{windowsOptions: {hostProcess: false}}`},
		{"hostname", "override", "spec.hostnameOverride", false, `my-host`},
		{"hostname", "override-bad", "spec.hostnameOverride", false, `Bad_Host!`},
		{"hostname", "override-hostnet", "spec", false, `{hostNetwork: true, hostnameOverride: my-host, containers: [{name: c, image: busybox}]}`},
		// Volumes.
		{"emptyDir", "hugepages", "spec.volumes", true, `{name: hp, emptyDir: {medium: HugePages}}`},
		{"emptyDir", "hugepages-2Mi", "spec.volumes", true, `{name: hp, emptyDir: {medium: HugePages-2Mi}}`},
		{"emptyDir", "bogus", "spec.volumes", true, `{name: hp, emptyDir: {medium: Bogus}}`},
		{"emptyDir", "memory-limit", "spec.volumes", true, `{name: hp, emptyDir: {medium: Memory, sizeLimit: 64Mi}}`},
		{"emptyDir", "negative-limit", "spec.volumes", true, `{name: hp, emptyDir: {sizeLimit: -1}}`},
		{"volumes", "relative-mount", c0 + ".volumeMounts", true, `{name: extra, mountPath: relative/dir}`},
		{"volumes", "hostpath-relative", "spec.volumes", true, `{name: extra, hostPath: {path: relative/dir}}`},
		{"volumes", "downward-resource-no-container", "spec.volumes", true, `{name: dw, downwardAPI: {items: [{path: cpu, resourceFieldRef: {resource: limits.cpu}}]}}`},
		{"volumes", "downward-bad-mode", "spec.volumes", true, `{name: dw, downwardAPI: {defaultMode: 01000, items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}`},
		{"volumes", "image-volume", "spec.volumes", true, `{name: img, image: {reference: busybox}}`},
		// ConfigMaps and Secrets, which a pod may use beside it.
		{"objects", "configmap-volume", "spec.volumes", true, `{name: cfg, configMap: {name: app-config, items: [{key: a, path: a.conf}], defaultMode: 0644}}`},
		{"objects", "configmap-volume-no-name", "spec.volumes", true, `{name: cfg, configMap: {items: [{key: a, path: a.conf}]}}`},
		{"objects", "configmap-volume-bad-name", "spec.volumes", true, `{name: cfg, configMap: {name: Bad_Name}}`},
		{"objects", "configmap-volume-dotdot-path", "spec.volumes", true, `{name: cfg, configMap: {name: c, items: [{key: a, path: ../a}]}}`},
		{"objects", "configmap-volume-abs-path", "spec.volumes", true, `{name: cfg, configMap: {name: c, items: [{key: a, path: /a}]}}`},
		{"objects", "configmap-volume-bad-key", "spec.volumes", true, `{name: cfg, configMap: {name: c, items: [{key: "bad key", path: a}]}}`},
		{"objects", "configmap-volume-bad-mode", "spec.volumes", true, `{name: cfg, configMap: {name: c, defaultMode: 01000}}`},
		{"objects", "secret-volume", "spec.volumes", true, `{name: sec, secret: {secretName: app-secret, optional: true, items: [{key: password, path: pw, mode: 0400}]}}`},
		{"objects", "secret-volume-no-name", "spec.volumes", true, `{name: sec, secret: {optional: true}}`},
		{"objects", "secret-volume-bad-item-mode", "spec.volumes", true, `{name: sec, secret: {secretName: s, items: [{key: k, path: p, mode: -1}]}}`},
		{"objects", "projected", "spec.volumes", true, `{name: all, projected: {sources: [{configMap: {name: c}}, {secret: {name: s}}, {downwardAPI: {items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}]}}`},
		{"objects", "projected-two-kinds", "spec.volumes", true, `{name: all, projected: {sources: [{configMap: {name: c}, secret: {name: s}}]}}`},
		{"objects", "projected-same-path", "spec.volumes", true, `{name: all, projected: {sources: [{configMap: {name: c, items: [{key: a, path: x}]}}, {secret: {name: s, items: [{key: b, path: x}]}}]}}`},
		{"objects", "env-configmap-key", c0 + ".env", true, `{name: A, valueFrom: {configMapKeyRef: {name: c, key: a}}}`},
		{"objects", "env-configmap-bad-key", c0 + ".env", true, `{name: A, valueFrom: {configMapKeyRef: {name: c, key: "bad key"}}}`},
		{"objects", "env-secret-no-name", c0 + ".env", true, `{name: A, valueFrom: {secretKeyRef: {key: a}}}`},
		{"objects", "envfrom-prefix", c0 + ".envFrom", true, `{prefix: APP_, configMapRef: {name: c, optional: true}}`},
		{"objects", "envfrom-both", c0 + ".envFrom", true, `{configMapRef: {name: c}, secretRef: {name: s}}`},
		{"objects", "envfrom-bad-name", c0 + ".envFrom", true, `{secretRef: {name: Bad_Name}}`},
		// Ports.
		{"ports", "hostip-name", c0 + ".ports", true, `{containerPort: 9999, hostPort: 9999, hostIP: localhost}`},
		{"ports", "hostip-ok", c0 + ".ports", true, `{containerPort: 9999, hostPort: 9999, hostIP: 127.0.0.1}`},
		{"ports", "container-whole-float", c0 + ".ports", true, `{containerPort: 9999.0, hostPort: 9999}`},
		{"ports", "container-fraction", c0 + ".ports", true, `{containerPort: 9999.5, hostPort: 9999}`},
		{"ports", "protocol-lower", c0 + ".ports", true, `{containerPort: 9999, hostPort: 9999, protocol: tcp}`},
		// Env.
		{"env", "resource-no-container", c0 + ".env", true, `{name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}`},
		{"env", "resource-other-container", c0 + ".env", true, `{name: CPU, valueFrom: {resourceFieldRef: {containerName: nosuch, resource: limits.cpu}}}`},
		{"env", "field-bad", c0 + ".env", true, `{name: X, valueFrom: {fieldRef: {fieldPath: spec.bogus}}}`},
		{"env", "name-equals", c0 + ".env", true, `{name: "A=B", value: x}`},
		// Probes.
		{"probes", "http-whole-float", c0 + ".readinessProbe", false, `{httpGet: {port: 8080.0, path: /}}`},
		{"probes", "http-fraction", c0 + ".readinessProbe", false, `{httpGet: {port: 8080.5, path: /}}`},
		{"probes", "tcp-whole-float", c0 + ".livenessProbe", false, `{tcpSocket: {port: 8080.0}}`},
		{"probes", "tcp-name-bad", c0 + ".livenessProbe", false, `{tcpSocket: {port: Bad_Port}}`},
		{"probes", "grpc-zero", c0 + ".startupProbe", false, `{grpc: {port: 0}}`},
		{"probes", "no-handler", c0 + ".readinessProbe", false, `{periodSeconds: 5}`},
		{"probes", "two-handlers", c0 + ".readinessProbe", false, `{exec: {command: ["true"]}, tcpSocket: {port: 80}}`},
		{"probes", "liveness-success-2", c0 + ".livenessProbe", false, `{exec: {command: ["true"]}, successThreshold: 2}`},
		{"probes", "readiness-grace", c0 + ".readinessProbe", false, `{exec: {command: ["true"]}, terminationGracePeriodSeconds: 5}`},
		// Init containers.
		{"initContainers", "restart-never", "spec.initContainers", true, `{name: init, image: busybox, restartPolicy: Never}`},
		{"initContainers", "restart-always", "spec.initContainers", true, `{name: init, image: busybox, restartPolicy: Always}`},
		{"initContainers", "restart-onfailure", "spec.initContainers", true, `{name: init, image: busybox, restartPolicy: OnFailure}`},
		{"initContainers", "probe-no-restart", "spec.initContainers", true, `{name: init, image: busybox, readinessProbe: {exec: {command: ["true"]}}}`},
		{"initContainers", "same-name", "spec.initContainers", true, `{name: dup, image: busybox}`},
		// Pod-level odds and ends.
		{"spec", "host-users-false-hostnet", "spec", false, `{hostNetwork: true, hostUsers: false, containers: [{name: c, image: busybox}]}`},
		{"spec", "share-pid-host-pid", "spec", false, `{hostPID: true, shareProcessNamespace: true, containers: [{name: c, image: busybox}]}`},
		{"spec", "os-windows", "spec.os", false, `{name: windows}`},
		{"spec", "os-bogus", "spec.os", false, `{name: bogus}`},
		{"spec", "overhead", "spec.overhead", false, `{cpu: 100m}`},
		{"spec", "priority-no-class", "spec.priority", false, `5`},
		{"spec", "sysctl-unsafe", "spec.securityContext", false, `{sysctls: [{name: "kernel.bogus!", value: "1"}]}`},
		{"spec", "fsgroup-policy-bogus", "spec.securityContext", false, `{fsGroupChangePolicy: Bogus}`},
		{"spec", "supplemental-policy-bogus", "spec.securityContext", false, `{supplementalGroupsPolicy: Bogus}`},
		{"spec", "seccomp-localhost-no-profile", "spec.securityContext", false, `{seccompProfile: {type: Localhost}}`},
		{"spec", "resources-pod-level", "spec.resources", false, `{limits: {cpu: "1"}}`},
		{"spec", "dns-none-no-config", "spec.dnsPolicy", false, `None`},
		{"spec", "readiness-gate-bad", "spec.readinessGates", false, `[{conditionType: "bad type!"}]`},
		{"spec", "host-alias-bad-ip", "spec.hostAliases", false, `[{ip: nope, hostnames: [a]}]`},
		{"resources", "request-over-limit", c0 + ".resources", false, `{requests: {cpu: "2"}, limits: {cpu: "1"}}`},
		{"resources", "bogus-name", c0 + ".resources", false, `{limits: {bogus: "1"}}`},
		{"resources", "hugepages-no-memory", c0 + ".resources", false, `{limits: {hugepages-2Mi: 2Mi}}`},
		{"security", "privileged-no-escalation", c0 + ".securityContext", false, `{privileged: true, allowPrivilegeEscalation: false}`},
		{"security", "proc-mount-unmasked", c0 + ".securityContext", false, `{procMount: Unmasked}`},
		{"security", "apparmor-localhost-no-profile", c0 + ".securityContext", false, `{appArmorProfile: {type: Localhost}}`},
	}
}

// objectAdditions are the fields added to every base ConfigMap or Secret
// of the kind given, one at a time, as additions are to pods.
func objectAdditions(kind string) []addition {
	// Just over the 1 MiB the values of an object may hold together.
	big := strings.Repeat("a", 1<<20+1)
	if kind == "ConfigMap" {
		return []addition{
			{"immutable", "true", "immutable", false, `true`},
			{"immutable", "string", "immutable", false, `"yes"`},
			{"size", "over-1MiB", "data.big", false, big},
			{"size", "just-under", "data.big", false, strings.Repeat("a", 1<<19)},
			{"keys", "dup-in-binary", "binaryData.LOG_LEVEL", false, `aW5mbw==`},
			{"keys", "dotdot-prefix", "data|..data", false, `x`},
			{"keys", "binary-not-base64", "binaryData.bad", false, `not base64!`},
			{"keys", "data-number", "data.count", false, `3`},
		}
	}
	return []addition{
		{"immutable", "true", "immutable", false, `true`},
		{"type", "custom", "type", false, `example.com/thing`},
		{"type", "empty", "type", false, `""`},
		{"type", "tls", "type", false, `kubernetes.io/tls`},
		{"type", "service-account-token", "type", false, `kubernetes.io/service-account-token`},
		{"type", "dockercfg", "type", false, `kubernetes.io/dockercfg`},
		{"type", "basic-auth", "type", false, `kubernetes.io/basic-auth`},
		{"type", "ssh-auth", "type", false, `kubernetes.io/ssh-auth`},
		{"type", "bootstrap-token", "type", false, `bootstrap.kubernetes.io/token`},
		{"size", "over-1MiB", "stringData.big", false, big},
		{"size", "just-under", "stringData.big", false, strings.Repeat("a", 1<<19)},
		{"keys", "not-json-config", "data|.dockerconfigjson", false, `bm90IGpzb24=`},
		{"keys", "not-base64", "data.bad", false, `not base64!`},
		{"keys", "empty-ssh-key", "stringData.ssh-privatekey", false, `""`},
		{"keys", "tls-cert-only", "stringData|tls.crt", false, `cert`},
	}
}
