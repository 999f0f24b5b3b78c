package pod

import (
	"strings"
	"testing"
)

// podWith returns a valid manifest with extra lines added to its spec, and
// to its container when container is set.
func podWith(spec, container string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n" + spec +
		"  containers:\n  - name: web\n    image: nginx:1.27\n" + container
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		wantErr  []string // substrings of the error; none means valid
	}{
		{"valid", podWith("", ""), nil},
		{"missing name", strings.Replace(podWith("", ""), "  name: web\n", "  labels: {a: b}\n", 1),
			[]string{"metadata.name: Required value"}},
		{"bad namespace", strings.Replace(podWith("", ""), "  name: web\n", "  name: web\n  namespace: kube.system\n", 1),
			[]string{"metadata.namespace: Invalid value"}},
		{"bad label", strings.Replace(podWith("", ""), "  name: web\n", "  name: web\n  labels:\n    'a b': c\n", 1),
			[]string{"metadata.labels: Invalid value"}},
		{"no containers", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: []\n",
			[]string{"spec.containers: Required value"}},
		{"bad container name", strings.Replace(podWith("", ""), "- name: web", "- name: Web_1", 1),
			[]string{"spec.containers[0].name: Invalid value"}},
		{"duplicate container name across init", podWith("  initContainers:\n  - name: web\n    image: busybox\n", ""),
			[]string{"spec.containers[0].name: Duplicate value"}},
		{"image with whitespace", strings.Replace(podWith("", ""), "image: nginx:1.27", "image: ' nginx'", 1),
			[]string{"spec.containers[0].image: Invalid value", "whitespace"}},
		{"bad port", podWith("", "    ports:\n    - containerPort: 70000\n"),
			[]string{"spec.containers[0].ports[0].containerPort: Invalid value"}},
		{"duplicate port name", podWith("", "    ports:\n    - name: http\n      containerPort: 80\n    - name: http\n      containerPort: 81\n"),
			[]string{"spec.containers[0].ports[1].name: Duplicate value"}},
		{"bad port name", podWith("", "    ports:\n    - name: HTTP_port\n      containerPort: 80\n"),
			[]string{"spec.containers[0].ports[0].name: Invalid value"}},
		{"hostNetwork port mismatch", podWith("  hostNetwork: true\n", "    ports:\n    - containerPort: 80\n      hostPort: 8080\n"),
			[]string{"spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match containerPort when hostNetwork is true"}},
		{"restartPolicy", podWith("  restartPolicy: Sometimes\n", ""),
			[]string{"spec.restartPolicy: Unsupported value"}},
		{"sidecar", podWith("  initContainers:\n  - name: side\n    image: busybox\n    restartPolicy: Always\n    readinessProbe:\n      exec:\n        command: [/bin/true]\n", ""), nil},
		{"init restartPolicy", podWith("  initContainers:\n  - name: side\n    image: busybox\n    restartPolicy: Never\n", ""),
			[]string{"spec.initContainers[0].restartPolicy: Unsupported value"}},
		{"init probe", podWith("  initContainers:\n  - name: i\n    image: busybox\n    livenessProbe:\n      exec:\n        command: [/bin/true]\n", ""),
			[]string{"spec.initContainers[0].livenessProbe: Forbidden"}},
		{"duplicate volume", podWith("  volumes:\n  - name: a\n  - name: a\n", ""),
			[]string{"spec.volumes[1].name: Duplicate value"}},
		{"bad volume name", podWith("  volumes:\n  - name: A\n", ""),
			[]string{"spec.volumes[0].name: Invalid value"}},
		{"mount of unknown volume", podWith("", "    volumeMounts:\n    - name: nope\n      mountPath: /x\n"),
			[]string{"spec.containers[0].volumeMounts[0].name: Not found"}},
		{"relative mountPath", podWith("  volumes:\n  - name: a\n", "    volumeMounts:\n    - name: a\n      mountPath: x\n"),
			[]string{"spec.containers[0].volumeMounts[0].mountPath: Invalid value", "absolute"}},
		{"duplicate mountPath", podWith("  volumes:\n  - name: a\n  - name: b\n", "    volumeMounts:\n    - name: a\n      mountPath: /x\n    - name: b\n      mountPath: /x/\n"),
			[]string{"spec.containers[0].volumeMounts[1].mountPath: Invalid value", "unique"}},
		{"probe without handler", podWith("", "    livenessProbe:\n      periodSeconds: 3\n"),
			[]string{"spec.containers[0].livenessProbe: Required value: must specify a handler type"}},
		{"probe with two handlers", podWith("", "    readinessProbe:\n      exec:\n        command: [/bin/true]\n      tcpSocket:\n        port: 80\n"),
			[]string{"spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than one handler type"}},
		{"liveness success threshold", podWith("", "    livenessProbe:\n      tcpSocket:\n        port: http\n      successThreshold: 2\n"),
			[]string{"spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"}},
		{"env name", podWith("", "    env:\n    - name: A=B\n      value: x\n"),
			[]string{"spec.containers[0].env[0].name: Invalid value"}},
		{"relaxed env name", podWith("", "    env:\n    - name: 1-my.var\n      value: x\n"), nil},
		{"env configMapKeyRef", podWith("", "    env:\n    - name: A\n      valueFrom:\n        configMapKeyRef:\n          name: c\n          key: k\n"),
			[]string{"spec.containers[0].env[0].valueFrom.configMapKeyRef: configMap references need an apiserver"}},
		{"env secretKeyRef", podWith("", "    env:\n    - name: A\n      valueFrom:\n        secretKeyRef:\n          name: s\n          key: k\n"),
			[]string{"spec.containers[0].env[0].valueFrom.secretKeyRef: secret references need an apiserver"}},
		{"env bad fieldRef", podWith("", "    env:\n    - name: A\n      valueFrom:\n        fieldRef:\n          fieldPath: spec.containers\n"),
			[]string{"spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value"}},
		{"env label fieldRef", podWith("", "    env:\n    - name: A\n      valueFrom:\n        fieldRef:\n          fieldPath: metadata.labels['app']\n"), nil},
		{"envFrom", podWith("", "    envFrom:\n    - configMapRef:\n        name: c\n    - secretRef:\n        name: s\n"),
			[]string{"spec.containers[0].envFrom[0].configMapRef: configMap references need an apiserver", "spec.containers[0].envFrom[1].secretRef: secret references need an apiserver"}},
		{"dnsPolicy", podWith("  dnsPolicy: Sometimes\n", ""),
			[]string{"spec.dnsPolicy: Unsupported value"}},
		{"dnsPolicy None without nameservers", podWith("  dnsPolicy: None\n", ""),
			[]string{"spec.dnsConfig.nameservers: Required value"}},
		{"ephemeral containers", podWith("  ephemeralContainers:\n  - name: debug\n    image: busybox\n", ""),
			[]string{"spec.ephemeralContainers: ephemeral containers are not supported for static pods"}},
		{"secret volume", podWith("  volumes:\n  - name: s\n    secret:\n      secretName: s\n", ""),
			[]string{"spec.volumes[0].secret: secret volumes need an apiserver"}},
		{"pvc volume", podWith("  volumes:\n  - name: s\n    persistentVolumeClaim:\n      claimName: c\n", ""),
			[]string{"spec.volumes[0].persistentVolumeClaim: persistentVolumeClaim volumes need an apiserver"}},
		{"projected volume", podWith("  volumes:\n  - name: s\n    projected:\n      sources:\n      - serviceAccountToken:\n          path: token\n", ""),
			[]string{"spec.volumes[0].projected: projected volumes", "need an apiserver"}},
		{"nfs volume", podWith("  volumes:\n  - name: s\n    nfs:\n      server: nfs.example\n      path: /x\n", ""),
			[]string{"spec.volumes[0].nfs: volume type nfs is not supported by staticlet"}},
		{"two volume types", podWith("  volumes:\n  - name: s\n    emptyDir: {}\n    hostPath:\n      path: /x\n", ""),
			[]string{"spec.volumes[0]: may not specify more than one volume type"}},
		{"hostPath type", podWith("  volumes:\n  - name: s\n    hostPath:\n      path: /x\n      type: Folder\n", ""),
			[]string{"spec.volumes[0].hostPath.type: Unsupported value"}},
		{"downwardAPI volume", podWith("  volumes:\n  - name: s\n    downwardAPI:\n      items:\n      - path: labels\n        fieldRef:\n          fieldPath: metadata.labels\n", ""), nil},
		{"downwardAPI escaping path", podWith("  volumes:\n  - name: s\n    downwardAPI:\n      items:\n      - path: ../labels\n        fieldRef:\n          fieldPath: metadata.labels\n", ""),
			[]string{"spec.volumes[0].downwardAPI.items[0].path: Invalid value"}},
		{"request above limit", podWith("", "    resources:\n      requests:\n        memory: 2Gi\n      limits:\n        memory: 1Gi\n"),
			[]string{"spec.containers[0].resources.requests[memory]: Invalid value"}},
		{"serviceAccountName carried", podWith("  serviceAccountName: default\n  automountServiceAccountToken: true\n", ""), nil},
		{"app container restartPolicy", podWith("", "    restartPolicy: Always\n"),
			[]string{"spec.containers[0].restartPolicy: per-container restart policies are not supported by staticlet"}},
		{"volumeDevices", podWith("", "    volumeDevices:\n    - name: d\n      devicePath: /dev/x\n"),
			[]string{"spec.containers[0].volumeDevices: volume devices need a persistentVolumeClaim"}},
		{"duplicate host port", podWith("", "    ports:\n    - containerPort: 80\n      hostPort: 80\n    - containerPort: 81\n      hostPort: 80\n"),
			[]string{"spec.containers[0].ports[1].hostPort: Duplicate value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("test.yaml", []byte(tc.manifest), testOpts)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode(%q): %v", tc.manifest, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode(%q) succeeded, want an error", tc.manifest)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Decode error =\n%v\nwant it to contain %q", err, want)
				}
			}
		})
	}
}
