package printers

import (
	"bytes"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/status"
)

func TestImages(t *testing.T) {
	var b bytes.Buffer
	err := Images(&b, &status.ImageList{
		Images: []status.Image{
			{Name: "docker.io/library/busybox:1.36", ID: "sha256:0123456789abcdef0123", Size: 4260000, Source: status.SourcePull,
				LastUsed: now.Add(-5 * time.Minute), Kept: []string{"in use", "manifest"}},
			{Name: "localhost/imported:v1", ID: "sha256:fedcba9876543210fedc", Size: 999, Source: "import:busybox.tar.gz",
				Kept: []string{"import file"}},
			{Name: "localhost/other:v1", ID: "sha256:aaaaaaaaaaaaaaaaaaaa", Size: 999999},
			{Name: "localhost/preloaded:v1", ID: "sha256:bbbbbbbbbbbbbbbbbbbb", Size: 320000, Source: "namespace:k8s.io"},
		},
		Imports: []status.ImportFile{
			{Path: "/i/busybox.tar.gz", Images: []string{"localhost/imported:v1"}},
			{Path: "/i/bad.tar", Error: "importing bad.tar:\n  unexpected EOF"},
		},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := `NAME                             ID             SIZE     SOURCE                                   LAST-USED   KEPT
docker.io/library/busybox:1.36   0123456789ab   4.26MB   pulled                                   5m          in use,manifest
localhost/imported:v1            fedcba987654   999B     imported from busybox.tar.gz             never       import file
localhost/other:v1               aaaaaaaaaaaa   1MB      <none>                                   never       <none>
localhost/preloaded:v1           bbbbbbbbbbbb   320kB    taken from containerd namespace k8s.io   never       <none>

FILE      ERROR
bad.tar   importing bad.tar: unexpected EOF
`
	if b.String() != want {
		t.Errorf("Images() =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	Images(&b, &status.ImageList{}, now)
	if b.String() != "NAME   ID    SIZE   SOURCE   LAST-USED   KEPT\n" {
		t.Errorf("Images(empty) = %q, want the header alone", b.String())
	}
}
