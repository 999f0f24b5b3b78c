package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	criremote "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// statusWriteTimeout bounds the write of a session's closing Status.
const statusWriteTimeout = 10 * time.Second

// streams are the streams of an exec or attach session the client asked
// for; those it did not ask for are nil.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	resize         <-chan criremote.TerminalSize
}

// serveV5 serves an exec or attach session over WebSocket with the v5
// channel protocol: v4's channels (stdin 0, stdout 1, stderr 2, the
// closing Status on 3, terminal sizes as JSON on 4) and the client's
// CLOSE signal, [255, channel], which ends its stdin. wsstream knows the
// protocol; this is the kubelet's v4 session (cri-streaming's) with it,
// as the apiserver serves v5 to kubectl. run runs the session and
// returns the Status it ends with.
func (s *Server) serveV5(w http.ResponseWriter, r *http.Request, opts streamOptions, run func(context.Context, streams) *apierrors.StatusError) {
	channels := make([]wsstream.ChannelType, 5)
	channels[remotecommand.StreamStdIn] = channelIf(opts.Stdin, wsstream.ReadChannel)
	channels[remotecommand.StreamStdOut] = channelIf(opts.Stdout, wsstream.WriteChannel)
	channels[remotecommand.StreamStdErr] = channelIf(opts.Stderr, wsstream.WriteChannel)
	channels[remotecommand.StreamErr] = wsstream.WriteChannel
	channels[remotecommand.StreamResize] = wsstream.ReadChannel
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommand.StreamProtocolV5Name: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(streamIdleTimeout)
	_, chans, err := conn.Open(w, r)
	if err != nil {
		s.log.Debug("upgrading to a v5 WebSocket session failed", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	// Closing the connection ends the reader of sizes: the wait comes
	// after it.
	defer wg.Wait()
	defer conn.Close()
	defer cancel()

	// An empty message on the first channel the client reads tells it
	// the session is open.
	first := remotecommand.StreamErr
	switch {
	case opts.Stdout:
		first = remotecommand.StreamStdOut
	case opts.Stderr:
		first = remotecommand.StreamStdErr
	}
	if _, err := chans[first].Write(nil); err != nil {
		return
	}
	st := streams{}
	if opts.Stdin {
		st.stdin = chans[remotecommand.StreamStdIn]
	}
	if opts.Stdout {
		st.stdout = chans[remotecommand.StreamStdOut]
	}
	if opts.Stderr {
		st.stderr = chans[remotecommand.StreamStdErr]
	}
	if opts.TTY {
		sizes := make(chan criremote.TerminalSize)
		st.resize = sizes
		wg.Go(func() { readSizes(ctx, chans[remotecommand.StreamResize], sizes) })
	}
	end := run(ctx, st)
	body, err := json.Marshal(end.Status())
	if err != nil {
		s.log.Warn("encoding the Status that ends a session", "err", err)
		return
	}
	conn.SetWriteDeadline(statusWriteTimeout)
	_, _ = chans[remotecommand.StreamErr].Write(body) // the client may be gone
}

// channelIf is t when the client asked for the stream, else a channel
// that is ignored.
func channelIf(asked bool, t wsstream.ChannelType) wsstream.ChannelType {
	if asked {
		return t
	}
	return wsstream.IgnoreChannel
}

// readSizes decodes the client's terminal sizes, JSON objects one after
// the other, until the stream or ctx ends.
func readSizes(ctx context.Context, from io.Reader, to chan<- criremote.TerminalSize) {
	defer close(to)
	dec := json.NewDecoder(from)
	for {
		var size criremote.TerminalSize
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case to <- size:
		case <-ctx.Done():
			return
		}
	}
}

// attachStatus is the Status an attach session ends with, the kubelet's.
func attachStatus(err error) *apierrors.StatusError {
	if err == nil {
		return exitStatus(nil)
	}
	return apierrors.NewInternalError(fmt.Errorf("error attaching to container: %w", err))
}
