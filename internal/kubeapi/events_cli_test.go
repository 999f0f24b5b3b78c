package kubeapi

import (
	"bytes"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// TestEventsAsTheCLIShowsThem: the core/v1 Events `staticlet get events
// -o jsonpath` prints, made from the status socket's event records as the
// CLI makes them, are the Events the API lists for the same store: the
// same names, counts, times, objects (with UID and fieldPath) and source.
func TestEventsAsTheCLIShowsThem(t *testing.T) {
	store, _ := eventStore(t)
	store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}})
	api := newTestAPI(t, Config{Store: store, NodeName: "node1"})
	listed, err := api.clientset(t).CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The CLI's path: the socket's records, the node's name, the builder.
	socket := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: status.NewServer(status.ServerConfig{Store: store}).Handler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := status.NewClient(socket)
	recorded, err := c.RecordedEvents(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	node, err := c.Node(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	shown := status.CoreEvents(recorded, node.Name)

	// client-go drops the items' kind, which the CLI's printers see; times
	// go through JSON at a second's precision in both.
	for i := range listed.Items {
		listed.Items[i].TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
	}
	if diff := cmp.Diff(listed.Items, shown, cmp.Transformer("time", func(t metav1.Time) string { return t.UTC().String() })); diff != "" {
		t.Errorf("the CLI's Events differ from the API's (-api +cli):\n%s", diff)
	}

	const path = `jsonpath={.items[*].metadata.name} {.items[*].count} {.items[*].involvedObject.uid} {.items[*].firstTimestamp} {.items[*].reportingComponent}`
	p, err := printers.Output{Format: path}.Printer(printers.Formats{Names: true})
	if err != nil {
		t.Fatal(err)
	}
	print := func(items []v1.Event) string {
		var b bytes.Buffer
		if err := printers.List(p, &b, "Event", items); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if api, cli := print(listed.Items), print(shown); api != cli || api == "" {
		t.Errorf("jsonpath of the API's Events:\n%s\nof the CLI's:\n%s", api, cli)
	}
}
