// Command prebuild builds the programs the tests build from the Go module
// proxy: the containerd releases they run against (ctrdtest.Releases, into
// ctrdtest.CacheDir), etcd (etcdtest.Build), and the kubectl and k9s that
// drive staticlet's Kubernetes API (kubetools), so that make test pays for
// a cold build once, before any test's timeout starts, rather than in the
// first test that needs each. With -list it builds nothing and prints what
// STATICLET_TEST_CONTAINERD may select, one a line: "system" (the
// distribution's containerd) and each release's series, the list make test
// runs the containerd tests once for.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/etcdtest"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

func main() {
	list := flag.Bool("list", false, "print the daemons to test against instead of building")
	flag.Parse()
	if *list {
		fmt.Println("system")
		for _, r := range ctrdtest.Releases {
			fmt.Println(r.Series)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	type build struct {
		what string
		run  func(context.Context) (string, error)
	}
	var builds []build
	for _, r := range ctrdtest.Releases {
		builds = append(builds, build{"containerd " + r.Version, func(ctx context.Context) (string, error) { return ctrdtest.Build(ctx, r) }})
	}
	builds = append(builds,
		build{"etcd " + etcdtest.Version, etcdtest.Build},
		build{"kubectl " + kubetools.KubectlVersion, kubetools.BuildKubectl},
		build{"k9s " + kubetools.K9sVersion, kubetools.BuildK9s},
	)
	for _, b := range builds {
		start := time.Now()
		path, err := b.run(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "prebuild:", err)
			os.Exit(1)
		}
		fmt.Printf("%s in %s (%.1fs)\n", b.what, path, time.Since(start).Seconds())
	}
}
