package cli

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// rootCommand is the command tree as main builds it, with a stand-in for
// the daemon's run command, which these tests do not run.
func rootCommand() *cobra.Command {
	return Root("dev", &cobra.Command{Use: "run"})
}

// syncBuffer is a bytes.Buffer safe for a command's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds, failing the test after timeout with
// what it waited for and cond's last detail.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
