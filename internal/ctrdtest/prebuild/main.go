// Command prebuild builds the containerd releases the tests run against
// (ctrdtest.Releases) into ctrdtest.CacheDir, so that make test pays for a
// cold build once, before any test's timeout starts, rather than in the
// first test that starts each release. With -list it builds nothing and
// prints what STATICLET_TEST_CONTAINERD may select, one a line: "system"
// (the distribution's containerd) and each release's series, the list make
// test runs the containerd tests once for.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/staticlet/staticlet/internal/ctrdtest"
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
	for _, r := range ctrdtest.Releases {
		start := time.Now()
		dir, err := ctrdtest.Build(ctx, r)
		if err != nil {
			fmt.Fprintln(os.Stderr, "prebuild:", err)
			os.Exit(1)
		}
		fmt.Printf("containerd %s in %s (%.1fs)\n", r.Version, dir, time.Since(start).Seconds())
	}
}
