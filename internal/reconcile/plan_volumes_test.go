package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// objPod is a pod whose container takes a variable from ConfigMap
// app-config and mounts it as volume cfg; ann is its restart-on-change
// annotation ("" for none).
func objPod(t *testing.T, ann string) *pod.Pod {
	t.Helper()
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\n"
	if ann != "" {
		doc += "  annotations:\n    staticlet.io/restart-on-change: " + ann + "\n"
	}
	doc += `spec:
  containers:
  - name: app
    image: busybox:1.36
    env:
    - name: LEVEL
      valueFrom:
        configMapKeyRef: {name: app-config, key: level}
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
  volumes:
  - {name: cfg, configMap: {name: app-config}}
`
	pods, err := pod.Decode("web.yaml", []byte(doc), pod.Options{NodeName: "node1", Seen: t0})
	if err != nil {
		t.Fatal(err)
	}
	return withUID(pods[0], "1")
}

// withConfig resolves p's objects: ConfigMap kube-system/app-config with
// level, or none when level is "".
func withConfig(t *testing.T, p *pod.Pod, level string) *pod.Pod {
	t.Helper()
	var cm *pod.Object
	if level != "" {
		m, err := pod.DecodeFile("cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config, namespace: kube-system}\ndata: {level: "+level+"}\n"), pod.Options{NodeName: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		cm = m.Objects[0]
	}
	return pod.Resolve(p, func(k pod.ObjectKey) *pod.Object {
		if cm != nil && k == cm.Key() {
			return cm
		}
		return nil
	})
}

func TestPlanObjects(t *testing.T) {
	missing := withConfig(t, objPod(t, ""), "")
	debug, info := withConfig(t, missing, "debug"), withConfig(t, missing, "info")
	sb := sbRec(missing, "sb1")
	a1 := startedAt(ctr(missing, "sb1", "app", "app-1", 0), 0)
	configErr := &pod.WaitingError{Reason: "CreateContainerConfigError", Err: errors.New(`configmap "app-config" not found`)}
	watched := withConfig(t, objPod(t, "cfg"), "debug")
	watchedInfo := withConfig(t, watched, "info")
	wsb := sbRec(watched, "sb1")
	w1 := startedAt(ctr(watched, "sb1", "app", "app-1", 0), 0)
	w1x := exitAt(w1, 143, 5*sec)
	runScenarios(t, []scenario{{
		name: "a missing ConfigMap: CreateContainerConfigError; its arrival starts the container at once",
		pod:  missing,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("sync-volumes sb1")},
			{give{o: volumesSynced{err: configErr}}, lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#0 in sb1")},
			{startFailed(configErr), lines(`event Warning Failed app: configmap "app-config" not found`, "list")},
			{ls(sb), lines("probe", "report Pending app=CreateContainerConfigError", "finish again=1s")},
			// Another look before the backoff is over, the object still
			// missing, tries the volume again, quietly, and starts nothing.
			{beginAt(300 * time.Millisecond), lines("list")},
			{ls(sb), lines("sync-volumes sb1")},
			{give{o: volumesSynced{err: configErr}}, lines("list")},
			{ls(sb), lines("probe", "report Pending app=CreateContainerConfigError", "finish again=700ms")},
			{desire{debug}, lines()},
			{beginAt(500 * time.Millisecond), lines("list")},
			{ls(sb), lines("sync-volumes sb1")},
			{volumesOK(), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#0 in sb1")},
			{startOK(startedAt(a1, 500*time.Millisecond)), lines("event Normal Started app: Started container app (app-1)", "list")},
		},
	}, {
		name: "an edited ConfigMap: its volume written anew, the container runs on",
		pod:  debug,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb, a1), lines("sync-volumes sb1")},
			{volumesOK(), lines("list")},
			{ls(sb, a1), lines("probe", "report Running app=running", "finish")},
			{beginAt(sec), lines("list")},
			{ls(sb, a1), lines("list")},
			{ls(sb, a1), lines("probe", "report Running app=running", "finish")},
			{desire{info}, lines()},
			{beginAt(2 * sec), lines("list")},
			{ls(sb, a1), lines("sync-volumes sb1")},
			{volumesOK(), lines("list")},
			{ls(sb, a1), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "a failed write is a warning, tried again at the next pass",
		pod:  debug,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb, a1), lines("sync-volumes sb1")},
			{give{o: volumesSynced{err: errors.New("no space left on device")}}, lines("warn updating the pod's configMap, secret and projected volumes", "list")},
			{ls(sb, a1), lines("probe", "report Running app=running", "finish")},
			{beginAt(sec), lines("list")},
			{ls(sb, a1), lines("sync-volumes sb1")},
		},
	}, {
		name: "restart-on-change names the volume: an edit restarts the container that mounts it",
		pod:  watched,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(wsb, w1), lines("sync-volumes sb1")},
			{volumesOK(), lines("list")},
			{ls(wsb, w1), lines("probe", "report Running app=running", "finish")},
			{desire{watchedInfo}, lines()},
			{beginAt(5 * sec), lines("list")},
			{ls(wsb, w1), lines("sync-volumes sb1")},
			{volumesOK(), lines(`event Normal Killing app: Container app: the content of ConfigMap "kube-system/app-config" (volume cfg), which it mounts, changed (staticlet.io/restart-on-change); it will be restarted`,
				"stop app-1 30s")},
			{stopOK(), lines("list")},
			{ls(wsb, w1x), lines("probe", "report Running app=Error(143)", "finish again=1ms")},
		},
	}})
}
