package netns

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
)

// TestDo dials a listener that exists only in a pod's network namespace:
// from inside through Do, and not from the host.
func TestDo(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "ns")
	if err := Create(Spec{Dir: dir, Kinds: []Kind{Net}}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = Remove(dir) })

	var ln net.Listener
	if err := Do(Path(dir, Net), func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("Do(listen): %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "inside")
			c.Close()
		}
	}()
	addr := ln.Addr().String()

	var conn net.Conn
	if err := Do(Path(dir, Net), func() error {
		var err error
		d := net.Dialer{FallbackDelay: -1}
		conn, err = d.DialContext(context.Background(), "tcp4", addr)
		return err
	}); err != nil {
		t.Fatalf("Do(dial %s): %v", addr, err)
	}
	// The connection is used outside Do, from any thread.
	b, err := io.ReadAll(conn)
	conn.Close()
	if err != nil || string(b) != "inside" {
		t.Errorf("read %q, %v through the connection dialled in the namespace, want \"inside\"", b, err)
	}
	if c, err := net.Dial("tcp4", addr); err == nil {
		// Something on the host has the same port: not a failure of Do.
		c.Close()
		t.Logf("%s also answers on the host", addr)
	}
	if err := Do(filepath.Join(dir, "missing"), func() error { return nil }); err == nil {
		t.Errorf("Do(missing namespace) = nil, want an error")
	}
}
