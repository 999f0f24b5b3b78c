package kubeapi

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

func testPod(ns, name, phase string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": name}, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))},
		Spec:   v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodPhase(phase), PodIP: "10.88.0.2"},
	}
}

// TestUnauthenticated: a client without a certificate gets 401 on every
// path, with the apiserver's Status.
func TestUnauthenticated(t *testing.T) {
	api := newTestAPI(t, Config{})
	cs, err := kubernetes.NewForConfig(api.anonymous())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("list pods without a certificate: %v, want 401 Unauthorized", err)
	}
	_, err = cs.Discovery().ServerVersion()
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("version without a certificate: %v, want 401 Unauthorized", err)
	}
}

// TestDiscovery: client-go's discovery (aggregated, as kubectl asks first)
// finds the pods, nodes and namespaces with their verbs.
func TestDiscovery(t *testing.T) {
	api := newTestAPI(t, Config{Version: "v0.9.0"})
	cs := api.clientset(t)
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || !strings.HasPrefix(v.GitVersion, "v1.") || !strings.Contains(v.GitVersion, "staticlet-0.9.0") {
		t.Errorf("version = %+v", v)
	}
	_, lists, err := cs.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			found[l.GroupVersion+"/"+r.Name] = r.Verbs
		}
	}
	for _, want := range []string{"v1/pods", "v1/nodes", "v1/namespaces"} {
		verbs, ok := found[want]
		if !ok {
			t.Errorf("discovery lacks %s: %v", want, found)
			continue
		}
		if strings.Join(verbs, ",") != "get,list,watch" {
			t.Errorf("%s verbs = %v", want, verbs)
		}
	}
}

// TestPodsListGet: the store's pods through client-go, by namespace, label
// and field selector, and one by name.
func TestPodsListGet(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetPod(testPod("kube-system", "etcd-node1", "Running"))
	api.store.SetPod(testPod("default", "web-node1", "Pending"))
	cs := api.clientset(t)
	ctx := context.Background()

	cases := []struct {
		ns, labels, fields string
		want               string
		wantErr            bool
	}{
		{want: "web-node1,etcd-node1"},
		{ns: "kube-system", want: "etcd-node1"},
		{labels: "app=web-node1", want: "web-node1"},
		{fields: "status.phase=Running", want: "etcd-node1"},
		{fields: "status.phase!=Running,spec.nodeName=node1", want: "web-node1"},
		{fields: "metadata.name=web-node1", want: "web-node1"},
		{fields: "spec.nope=x", wantErr: true},
	}
	for _, tc := range cases {
		list, err := cs.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields})
		if tc.wantErr {
			if !apierrors.IsBadRequest(err) {
				t.Errorf("list %+v: %v, want 400", tc, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("list %+v: %v", tc, err)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("list %+v = %s, want %s", tc, got, tc.want)
		}
		if list.ResourceVersion == "" {
			t.Errorf("list %+v has no resourceVersion", tc)
		}
	}
	p, err := cs.CoreV1().Pods("kube-system").Get(ctx, "etcd-node1", metav1.GetOptions{})
	if err != nil || p.Status.PodIP != "10.88.0.2" || p.ResourceVersion == "" {
		t.Fatalf("get = %+v, %v", p, err)
	}
	_, err = cs.CoreV1().Pods("kube-system").Get(ctx, "nope", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `pods "nope" not found`) {
		t.Fatalf("get a missing pod: %v", err)
	}
}

// TestPodWritesRefused: writes answer 405 naming the manifest to edit.
func TestPodWritesRefused(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetPod(testPod("kube-system", "etcd-node1", "Running"))
	api.store.SetManifests([]status.Manifest{{Source: "/etc/kubernetes/manifests",
		Path: "/etc/kubernetes/manifests/etcd.yaml", Pods: []string{"kube-system/etcd-node1"}}})
	cs := api.clientset(t)
	ctx := context.Background()
	err := cs.CoreV1().Pods("kube-system").Delete(ctx, "etcd-node1", metav1.DeleteOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "/etc/kubernetes/manifests/etcd.yaml") {
		t.Fatalf("delete: %v, want 405 naming the manifest", err)
	}
	_, err = cs.CoreV1().Pods("default").Create(ctx, testPod("default", "new", ""), metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "/etc/kubernetes/manifests") {
		t.Fatalf("create: %v, want 405 naming the manifest directory", err)
	}
	if _, ok := api.store.Pod("kube-system/etcd-node1"); !ok {
		t.Fatal("the pod is gone from the store")
	}
}

// TestPodWatch: a watch from a list's resourceVersion sees a change, a
// watch from a revision the store no longer has gets 410 Expired, and one
// with a field selector sees a pod leave it as a deletion.
func TestPodWatch(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetPod(testPod("default", "a", "Pending"))
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	sel, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending"})
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Stop()
	expect(t, sel, watch.Added, "a")

	api.store.SetPod(testPod("default", "a", "Running"))
	ev := expect(t, w, watch.Modified, "a")
	if ev.Object.(*v1.Pod).Status.Phase != v1.PodRunning {
		t.Errorf("modified pod = %+v", ev.Object)
	}
	expect(t, sel, watch.Deleted, "a")
	api.store.DeletePod(pod.Key{Namespace: "default", Name: "a"})
	expect(t, w, watch.Deleted, "a")

	old, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Stop()
	e := <-old.ResultChan()
	if e.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(e.Object)) {
		t.Fatalf("watch from an old revision: %v %+v, want ERROR 410", e.Type, e.Object)
	}
}

// expect reads the next event of w and checks its type and object's
// name.
func expect(t *testing.T, w watch.Interface, typ watch.EventType, name string) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch ended, want %s %s", typ, name)
		}
		m, isObject := ev.Object.(metav1.Object)
		if ev.Type != typ || !isObject || m.GetName() != name {
			t.Fatalf("event %s %+v, want %s %s", ev.Type, ev.Object, typ, name)
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("no event, want %s %s", typ, name)
	}
	return watch.Event{}
}

// TestInformer: a client-go informer lists and watches the pods and sees
// adds, updates and deletes.
func TestInformer(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetPod(testPod("default", "a", "Running"))
	cs := api.clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	want := informerEvents(t, inf, func(p *v1.Pod) string { return string(p.Status.Phase) })
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	want("add a")
	api.store.SetPod(testPod("default", "b", "Pending"))
	want("add b")
	api.store.SetPod(testPod("default", "b", "Running"))
	want("update b Running")
	api.store.DeletePod(pod.Key{Namespace: "default", Name: "a"})
	want("delete a")
}

// TestObjects: the ConfigMaps and Secrets in force through client-go, a
// Secret without its values, and a watch that sees an edit.
func TestObjects(t *testing.T) {
	api := newTestAPI(t, Config{})
	decode := func(doc string) []*pod.Object {
		t.Helper()
		m, err := pod.DecodeFile("/etc/kubernetes/manifests/objs.yaml", []byte(doc), pod.Options{NodeName: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		return m.Objects
	}
	const objs = `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: kube-system}
data: {a: one, b: two}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: kube-system}
stringData: {password: hunter2}
`
	api.store.SetObjects(decode(objs))
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "cfg", metav1.GetOptions{})
	if err != nil || cm.Data["a"] != "one" || cm.ResourceVersion == "" {
		t.Fatalf("configmap = %+v, %v", cm, err)
	}
	sec, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "creds", metav1.GetOptions{})
	if err != nil || len(sec.Data) != 0 || len(sec.StringData) != 0 || sec.Annotations[status.AnnotationSecretKeys] != "password=7" {
		t.Fatalf("secret = %+v, %v; want no data, its keys in an annotation", sec, err)
	}
	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("first event %v", ev)
	}
	api.store.SetObjects(decode(strings.Replace(objs, "a: one", "a: uno", 1)))
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Modified || ev.Object.(*v1.ConfigMap).Data["a"] != "uno" {
			t.Fatalf("after the edit: %v %+v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no event after the edit")
	}
}
