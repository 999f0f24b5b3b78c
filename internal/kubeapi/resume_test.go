package kubeapi

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/staticlet/staticlet/internal/pod"
)

// configMapObject is the ConfigMap ns/name of the manifests with one value.
func configMapObject(ns, name, value string) *pod.Object {
	return &pod.Object{ConfigMap: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"k": value}}, Source: "/etc/kubernetes/manifests/cm.yaml"}
}

// secretObject is the Secret ns/name of the manifests with one value.
func secretObject(ns, name, value string) *pod.Object {
	return &pod.Object{Secret: &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"password": []byte(value)}}, Source: "/etc/kubernetes/manifests/secret.yaml"}
}

// expectExpired reads the first event of a watch from a version too old:
// an ERROR with the apiserver's 410 Expired.
func expectExpired(t *testing.T, w watch.Interface, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(e.Object)) {
			t.Fatalf("watch from an old revision: %v %+v, want ERROR 410 Expired", e.Type, e.Object)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch from an old revision: no event, want ERROR 410 Expired")
	}
}

// TestWatchResumeObjects: a watch of ConfigMaps or Secrets from a list's
// resourceVersion sees exactly the changes made after the list, in all
// namespaces or one, and a version too old is 410 Expired.
func TestWatchResumeObjects(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "1"), configMapObject("a", "y", "1"),
		secretObject("a", "s", "hunter2")})
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cms, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil || len(cms.Items) != 2 {
		t.Fatalf("list configmaps = %+v, %v; want 2", cms, err)
	}
	secs, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil || len(secs.Items) != 1 {
		t.Fatalf("list secrets = %+v, %v; want 1", secs, err)
	}

	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "2"), secretObject("a", "s", "hunter3")})
	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "2"), secretObject("a", "s", "hunter3"),
		configMapObject("b", "z", "1")})

	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: cms.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	x := expect(t, w, watch.Modified, "x").Object.(*v1.ConfigMap)
	expect(t, w, watch.Deleted, "y")
	expect(t, w, watch.Added, "z")
	got, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "x", metav1.GetOptions{})
	if err != nil || x.Data["k"] != "2" || got.ResourceVersion != x.ResourceVersion || x.ResourceVersion == cms.Items[0].ResourceVersion {
		t.Errorf("modified x = %+v; get = %+v, %v; want the new value with a new resourceVersion, the same in both", x, got, err)
	}

	inA, err := cs.CoreV1().ConfigMaps("a").Watch(ctx, metav1.ListOptions{ResourceVersion: cms.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer inA.Stop()
	expect(t, inA, watch.Modified, "x")
	expect(t, inA, watch.Deleted, "y")
	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "3"), secretObject("a", "s", "hunter3"),
		configMapObject("b", "z", "2")})
	expect(t, inA, watch.Modified, "x") // not z, in b

	sw, err := cs.CoreV1().Secrets("").Watch(ctx, metav1.ListOptions{ResourceVersion: secs.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()
	if s := expect(t, sw, watch.Modified, "s").Object.(*v1.Secret); len(s.Data) != 0 || len(s.StringData) != 0 {
		t.Errorf("modified secret has its values: %+v", s)
	}

	old, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	expectExpired(t, old, err)
	old, err = cs.CoreV1().Secrets("a").Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	expectExpired(t, old, err)
}

// TestWatchResumeNamespaces: a watch of namespaces from a list's
// resourceVersion sees a namespace appear with its first pod and go with
// its last; "default" and "kube-node-lease" stay.
func TestWatchResumeNamespaces(t *testing.T) {
	api := newTestAPI(t, Config{})
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 || list.Items[0].Name != "default" || list.Items[1].Name != "kube-node-lease" {
		t.Fatalf("namespaces = %+v, %v; want default and kube-node-lease", list, err)
	}

	api.store.SetPod(testPod("default", "a", "Running"))
	api.store.SetPod(testPod("team", "a", "Running"))
	api.store.SetPod(testPod("team", "b", "Running"))
	api.store.DeletePod(pod.Key{Namespace: "team", Name: "a"})
	api.store.DeletePod(pod.Key{Namespace: "team", Name: "b"})
	api.store.DeletePod(pod.Key{Namespace: "default", Name: "a"})
	api.store.SetObjects([]*pod.Object{configMapObject("zeta", "x", "1")})

	w, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ns := expect(t, w, watch.Added, "team").Object.(*v1.Namespace); ns.Status.Phase != v1.NamespaceActive {
		t.Errorf("added namespace %+v, want Active", ns)
	}
	expect(t, w, watch.Deleted, "team")
	expect(t, w, watch.Added, "zeta") // and nothing about default

	now, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil || len(now.Items) != 3 || now.Items[0].Name != "default" || now.Items[2].Name != "zeta" {
		t.Fatalf("namespaces = %+v, %v; want default, kube-node-lease and zeta", now, err)
	}
	old, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	expectExpired(t, old, err)
}

// TestConfigMapInformer: a client-go informer lists and watches the
// ConfigMaps and sees adds, updates and deletes.
func TestConfigMapInformer(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(api.clientset(t), 0)
	inf := factory.Core().V1().ConfigMaps().Informer()
	want := informerEvents(t, inf, func(cm *v1.ConfigMap) string { return cm.Data["k"] })
	factory.Start(ctx.Done())
	defer func() {
		cancel() // ends the informer, which Shutdown waits for
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	want("add x")
	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "1"), configMapObject("a", "y", "1")})
	want("add y")
	api.store.SetObjects([]*pod.Object{configMapObject("a", "x", "2"), configMapObject("a", "y", "1")})
	want("update x 2")
	api.store.SetObjects([]*pod.Object{configMapObject("a", "y", "1")})
	want("delete x")
}

// informerEvents records the events of inf, not started yet, as "add
// NAME", "update NAME DETAIL" and "delete NAME", and returns a check that
// the next one is that wanted.
func informerEvents[T metav1.Object](t *testing.T, inf cache.SharedIndexInformer, detail func(T) string) func(want string) {
	events := make(chan string, 100)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(T).GetName() },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(T).GetName() + " " + detail(obj.(T)) },
		DeleteFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				events <- "delete " + o.GetName()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	return func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("informer: %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("informer: nothing, want %q", want)
		}
	}
}

// TestWatchResumeNode: the node, which keeps no history, is not sent
// again to a watch from a list's resourceVersion (kubectl get nodes -w
// would print it twice), but its next change is MODIFIED; a watch from
// before its last change gets it as MODIFIED at once.
func TestWatchResumeNode(t *testing.T) {
	api := newTestAPI(t, Config{NodeName: "node1"})
	api.store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}})
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("nodes = %+v, %v; want node1", list, err)
	}
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	api.store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{"x": "y"}}})
	if n := expect(t, w, watch.Modified, "node1").Object.(*v1.Node); n.Labels["x"] != "y" {
		t.Errorf("modified node %+v, want the label x=y", n)
	}

	stale, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Stop()
	expect(t, stale, watch.Modified, "node1")
}
