package kubeapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// tableAccept is what kubectl get sends: the Table form first.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// getTable asks path for the Table form, as kubectl get does.
func getTable(t *testing.T, api *testAPI, path string) *metav1.Table {
	t.Helper()
	client, err := rest.HTTPClientFor(api.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, api.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", tableAccept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || table.Kind != "Table" {
		t.Fatalf("GET %s as Table: %d %+v", path, resp.StatusCode, table)
	}
	return &table
}

// TestPodTable: the pods' Table has the apiserver's columns (the wide ones
// at priority 1) and staticlet's cells, with each row's metadata.
func TestPodTable(t *testing.T) {
	api := newTestAPI(t, Config{})
	p := testPod("kube-system", "etcd-node1", "Running")
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	api.store.SetPod(p)

	table := getTable(t, api, "/api/v1/pods")
	var names []string
	for _, c := range table.ColumnDefinitions {
		name := c.Name
		if c.Priority > 0 {
			name += "*"
		}
		names = append(names, name)
	}
	if got := strings.Join(names, ","); got != "Name,Ready,Status,Restarts,Age,IP*,Node*,Nominated Node*,Readiness Gates*" {
		t.Errorf("columns = %s", got)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows = %+v", table.Rows)
	}
	cells := table.Rows[0].Cells
	want := []any{"etcd-node1", "1/1", "Running", "2", "60s", "10.88.0.2", "node1", "<none>", "<none>"}
	for i := range want {
		if i == 4 {
			continue // the age depends on the clock
		}
		if cells[i] != want[i] {
			t.Errorf("cell %d (%s) = %v, want %v", i, table.ColumnDefinitions[i].Name, cells[i], want[i])
		}
	}
	var meta metav1.PartialObjectMetadata
	if err := json.Unmarshal(table.Rows[0].Object.Raw, &meta); err != nil || meta.Name != "etcd-node1" || meta.Namespace != "kube-system" {
		t.Errorf("row object = %s, %v", table.Rows[0].Object.Raw, err)
	}

	one := getTable(t, api, "/api/v1/namespaces/kube-system/pods/etcd-node1")
	if len(one.Rows) != 1 || one.Rows[0].Cells[0] != "etcd-node1" {
		t.Errorf("one pod's table = %+v", one.Rows)
	}
	nodes := getTable(t, api, "/api/v1/nodes")
	if len(nodes.Rows) != 1 || len(nodes.Rows[0].Cells) != len(nodes.ColumnDefinitions) {
		t.Errorf("nodes table = %+v", nodes)
	}
	nss := getTable(t, api, "/api/v1/namespaces")
	var nsNames []string
	for _, r := range nss.Rows {
		nsNames = append(nsNames, r.Cells[0].(string)+"="+r.Cells[1].(string))
	}
	if got := strings.Join(nsNames, ","); got != "default=Active,kube-node-lease=Active,kube-system=Active" {
		t.Errorf("namespaces = %s", got)
	}
}

// TestProtobuf: a client that speaks protobuf, as controllers do, lists and
// gets pods.
func TestProtobuf(t *testing.T) {
	api := newTestAPI(t, Config{})
	api.store.SetPod(testPod("default", "a", "Running"))
	cfg := rest.CopyConfig(api.config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Status.PodIP != "10.88.0.2" {
		t.Fatalf("list over protobuf = %+v, %v", list, err)
	}
	w, err := cs.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expect(t, w, "ADDED", "a")
}
