package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	v1 "k8s.io/api/core/v1"
)

// PodsMatching returns the pods whose labels the selector selects (in the
// syntax of kubectl's -l, parsed by the server); an empty selector selects
// every pod.
func (c *Client) PodsMatching(ctx context.Context, selector string) (*v1.PodList, error) {
	path := "/pods"
	if selector != "" {
		path += "?labelSelector=" + url.QueryEscape(selector)
	}
	var list v1.PodList
	if err := c.getJSON(ctx, path, &list); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return &list, nil
}

// WatchPods calls fn for each line of the pod watch stream: an ADDED event
// for every pod the selector selects, a BOOKMARK once they are all sent,
// then one event per change. It returns fn's error, ctx's error once ctx
// is done, or an error wrapping ErrNotRunning when staticlet ends the
// stream (it stops).
func (c *Client) WatchPods(ctx context.Context, selector string, fn func(PodWatchEvent) error) error {
	q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}}
	if selector != "" {
		q.Set("labelSelector", selector)
	}
	err := watchStream(ctx, c, "/pods?"+q.Encode(), func(ev PodWatchEvent) error {
		if ev.Type == WatchError {
			return errors.New("the server ended the watch")
		}
		return fn(ev)
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	return nil
}

// WatchEvents calls fn for each event of the pod podName ("name" or
// "namespace/name"; every pod's when empty): the recent ones first, then
// an event of type BOOKMARK, then each new one. It returns as WatchPods
// does, and with the server's message when the server ends the watch
// because it fell behind. The events are the store's records, as
// Events(podName) has them.
func (c *Client) WatchEvents(ctx context.Context, podName string, fn func(RecordedEvent) error) error {
	q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}}
	if podName != "" {
		q.Set("pod", podName)
	}
	err := watchStream(ctx, c, "/events?"+q.Encode(), func(e RecordedEvent) error {
		if e.Type == string(WatchError) {
			return errors.New(e.Message)
		}
		return fn(e)
	})
	if err != nil {
		return fmt.Errorf("watching events: %w", err)
	}
	return nil
}

// watchStream decodes the JSON lines of the stream at path into values of
// type T and calls fn with each, until fn fails, ctx is done or the stream
// ends. The stream is not bounded by the client's default timeout.
func watchStream[T any](ctx context.Context, c *Client, path string, fn func(T) error) error {
	resp, err := c.sendOK(ctx, http.MethodGet, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var v T
		err := dec.Decode(&v)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &kindError{msg: "staticlet ended the stream: it stops", kind: ErrNotRunning, err: err}
		}
		if err != nil {
			return c.transportError(err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
}
