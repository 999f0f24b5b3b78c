package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestServerImages(t *testing.T) {
	store := NewStore()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	store.SetImports([]ImportFile{
		{Path: "/i/busybox.tar.gz", Digest: "sha256:aa", Images: []string{"localhost/imported:v1"}, Time: created},
		{Path: "/i/bad.tar", Digest: "sha256:bb", Error: "importing bad.tar: unexpected EOF", Time: created},
	})
	// An event of no pod is listed with all events, and with no pod's.
	store.Event(pod.Event{Type: pod.EventNormal, Reason: "Imported", Message: "Imported localhost/imported:v1 from busybox.tar.gz"})
	store.Event(pod.Event{Pod: "default/web", Type: pod.EventNormal, Reason: "Started"})
	var fail bool
	lister := func(context.Context) ([]Image, error) {
		if fail {
			return nil, errors.New("containerd is away")
		}
		return []Image{{Name: "localhost/imported:v1", ID: "sha256:0123456789abcdef", Size: 1234567, Source: "import:busybox.tar.gz", Created: created}}, nil
	}
	c := startServer(t, ServerConfig{Store: store, Images: lister})
	ctx := context.Background()

	list, err := c.Images(ctx)
	if err != nil {
		t.Fatalf("Images() error: %v", err)
	}
	if len(list.Images) != 1 || list.Images[0].Source != "import:busybox.tar.gz" || !list.Images[0].Created.Equal(created) {
		t.Errorf("Images().Images = %+v", list.Images)
	}
	if len(list.Imports) != 2 || list.Imports[1].Error == "" || list.Imports[0].Images[0] != "localhost/imported:v1" {
		t.Errorf("Images().Imports = %+v", list.Imports)
	}
	if evs, _ := c.Events(ctx, ""); len(evs) != 2 {
		t.Errorf("Events() = %+v, want both events", evs)
	}
	if evs, _ := c.Events(ctx, "web"); len(evs) != 1 || evs[0].Reason != "Started" {
		t.Errorf("Events(web) = %+v, want only the pod's", evs)
	}

	fail = true
	if _, err := c.Images(ctx); err == nil || !strings.Contains(err.Error(), "containerd is away") {
		t.Errorf("Images() with the runtime failing = %v, want its error", err)
	}
}
