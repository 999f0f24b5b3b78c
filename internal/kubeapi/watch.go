package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/staticlet/staticlet/internal/status"
)

const (
	// bookmarkEvery is how often a watch that allows bookmarks gets one.
	bookmarkEvery = time.Minute
	// defaultWatchTimeout ends a watch that asked for no timeoutSeconds,
	// as the apiserver's minimum request timeout does.
	defaultWatchTimeout = 30 * time.Minute
	// initialEventsEnd annotates the bookmark that ends the initial
	// events of a watch that asked for them (sendInitialEvents).
	initialEventsEnd = "k8s.io/initial-events-end"
)

// watchStream writes the events of one watch in the negotiated encoding.
type watchStream struct {
	s     *Server
	c     *collection
	r     *http.Request
	w     http.ResponseWriter
	rc    *http.ResponseController
	t     target
	table bool
	// sent are the objects the client knows, by namespace/name, with
	// their last resourceVersion: what a deletion or a selector no longer
	// matching must be told about.
	sent map[types.NamespacedName]string
	// resumed is set for a watch that started after a resourceVersion:
	// the client knows the objects of that revision, which sent lacks,
	// but for those in gone, which it was told were deleted.
	resumed bool
	gone    map[types.NamespacedName]bool
}

// serveWatch streams the changes of a collection's objects that the
// selectors select, from the request's resourceVersion: "" or "0" start
// with the current objects as ADDED (as does sendInitialEvents=true, which
// ends them with a bookmark), another resumes after it, or answers an
// ERROR event with 410 Expired when its changes are no longer known.
func (s *Server) serveWatch(c *collection, w http.ResponseWriter, r *http.Request, req request, sel selectors) {
	t, ok := negotiate(r.Header.Get("Accept"), asTable, asPartial)
	if !ok {
		s.writeStatus(w, r, notAcceptable(r.Header.Get("Accept")))
		return
	}
	q := r.URL.Query()
	timeout := defaultWatchTimeout
	if v := q.Get("timeoutSeconds"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 0 {
			s.writeStatus(w, r, apierrors.NewBadRequest("invalid timeoutSeconds "+strconv.Quote(v)))
			return
		}
		if secs > 0 {
			timeout = time.Duration(secs) * time.Second
		}
	}
	rv := q.Get("resourceVersion")
	from, err := strconv.ParseUint(rv, 10, 64)
	if rv != "" && rv != "0" && err != nil {
		s.writeStatus(w, r, apierrors.NewBadRequest("invalid resourceVersion "+strconv.Quote(rv)))
		return
	}
	initial := rv == "" || rv == "0" || q.Get("sendInitialEvents") == "true"
	bookmarks := q.Get("allowWatchBookmarks") == "true"

	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	sub := s.cfg.Store.Subscribe()
	defer sub.Close()

	ws := &watchStream{s: s, c: c, r: r, w: w, rc: http.NewResponseController(w), t: t,
		table: t.as == asTable, sent: map[types.NamespacedName]string{}, gone: map[types.NamespacedName]bool{}}
	contentType := t.mediaType
	if t.mediaType == mediaProtobuf {
		contentType += ";stream=watch"
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)

	ws.resumed = !initial
	switch {
	case initial:
		objs, rev := c.snapshot(req.namespace)
		for _, obj := range objs {
			if c.matches(obj, req.namespace, sel) && ws.send(watch.Added, obj) != nil {
				return
			}
		}
		from = rev
		if q.Get("sendInitialEvents") == "true" && ws.bookmark(from, true) != nil {
			return
		}
	case c.since == nil:
		ws.knownAt(from, req.namespace, sel)
	}
	if ws.rc.Flush() != nil {
		return
	}
	ticker := time.NewTicker(bookmarkEvery)
	defer ticker.Stop()
	var refresh <-chan time.Time
	if c.refresh > 0 {
		t := time.NewTicker(c.refresh)
		defer t.Stop()
		refresh = t.C
	}
	for {
		next, err := ws.changes(from, req.namespace, sel)
		if err != nil {
			ws.expired(err)
			return
		}
		from = next
		if ws.rc.Flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-sub.Changed():
		case <-refresh:
		case <-ticker.C:
			if bookmarks && (ws.bookmark(from, false) != nil || ws.rc.Flush() != nil) {
				return
			}
		}
	}
}

// changes sends what changed after revision from and returns the revision
// it has sent up to.
func (ws *watchStream) changes(from uint64, ns string, sel selectors) (uint64, error) {
	if ws.c.since == nil {
		return ws.diff(ns, sel)
	}
	changes, err := ws.c.since(from)
	if err != nil {
		return from, err
	}
	for _, ch := range changes {
		if err := ws.apply(ch.typ, ch.obj, ns, sel); err != nil {
			return from, err
		}
		from = ch.rev
	}
	return from, nil
}

// apply sends one change as the client that watches with sel must see it:
// an object that stops matching is deleted for it, one that starts
// matching added.
func (ws *watchStream) apply(typ watch.EventType, obj runtime.Object, ns string, sel selectors) error {
	key := objectKey(obj)
	_, known := ws.sent[key]
	if !known && ws.resumed && !ws.gone[key] {
		known = typ != watch.Added
	}
	match := typ != watch.Deleted && ws.c.matches(obj, ns, sel)
	switch {
	case match && known:
		return ws.send(watch.Modified, obj)
	case match:
		return ws.send(watch.Added, obj)
	case known:
		return ws.send(watch.Deleted, obj)
	}
	return nil
}

// knownAt records, for a resumed watch of a collection that keeps no
// history, the objects the client knows as of revision from: those not
// changed since, which are then not sent again. The others are sent as
// MODIFIED, as the client may know an older version of them.
func (ws *watchStream) knownAt(from uint64, ns string, sel selectors) {
	objs, _ := ws.c.snapshot(ns)
	for _, obj := range objs {
		rv := resourceVersion(obj)
		if v, err := strconv.ParseUint(rv, 10, 64); err == nil && v <= from && ws.c.matches(obj, ns, sel) {
			ws.sent[objectKey(obj)] = rv
		}
	}
}

// diff sends the differences between what the client knows and the
// collection now, for collections that keep no history.
func (ws *watchStream) diff(ns string, sel selectors) (uint64, error) {
	objs, rev := ws.c.snapshot(ns)
	seen := map[types.NamespacedName]bool{}
	for _, obj := range objs {
		key := objectKey(obj)
		seen[key] = true
		if last, ok := ws.sent[key]; ok && last == resourceVersion(obj) {
			continue
		}
		if err := ws.apply(watch.Modified, obj, ns, sel); err != nil {
			return rev, err
		}
	}
	for key := range ws.sent {
		if !seen[key] {
			gone := partialMetadata(nil)
			gone.Name, gone.Namespace = key.Name, key.Namespace
			delete(ws.sent, key)
			if err := ws.event(watch.Deleted, gone); err != nil {
				return rev, err
			}
		}
	}
	return rev, nil
}

// send writes one event about obj and records what the client knows.
func (ws *watchStream) send(typ watch.EventType, obj runtime.Object) error {
	key := objectKey(obj)
	if typ == watch.Deleted {
		delete(ws.sent, key)
		ws.gone[key] = true
	} else {
		ws.sent[key] = resourceVersion(obj)
		delete(ws.gone, key)
	}
	var out runtime.Object = obj
	switch {
	case ws.table:
		out = ws.s.toTable(ws.c, ws.r, []runtime.Object{obj}, resourceVersion(obj))
	case ws.t.as == asPartial:
		out = partialMetadata(obj)
	}
	return ws.event(typ, out)
}

// bookmark sends a BOOKMARK at revision rev; end marks the end of the
// initial events.
func (ws *watchStream) bookmark(rev uint64, end bool) error {
	obj := partialMetadata(nil)
	obj.ResourceVersion = strconv.FormatUint(rev, 10)
	if end {
		obj.Annotations = map[string]string{initialEventsEnd: "true"}
	}
	return ws.event(watch.Bookmark, ws.bookmarkObject(obj))
}

// bookmarkObject gives a bookmark the kind of the watched objects, which
// clients check.
func (ws *watchStream) bookmarkObject(p *metav1.PartialObjectMetadata) runtime.Object {
	if ws.table || ws.t.as == asPartial {
		return p
	}
	obj := ws.c.empty()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(p.ResourceVersion)
		m.SetAnnotations(p.Annotations)
	}
	return obj
}

// expired ends the watch with the ERROR event of a resource version the
// server no longer has.
func (ws *watchStream) expired(err error) {
	msg := err.Error()
	if errors.Is(err, status.ErrRevisionGone) {
		msg = "too old resource version: " + msg
	}
	st := apierrors.NewResourceExpired(msg).ErrStatus
	st.APIVersion, st.Kind = "v1", "Status"
	if ws.event(watch.Error, &st) == nil {
		ws.rc.Flush()
	}
}

// event writes one watch event frame.
func (ws *watchStream) event(typ watch.EventType, obj runtime.Object) error {
	raw, err := ws.s.codecs.encode(ws.t.mediaType, obj)
	if err != nil {
		return fmt.Errorf("encoding watch event: %w", err)
	}
	if ws.t.mediaType != mediaProtobuf {
		raw = bytes.TrimRight(raw, "\n")
	}
	ev := &metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}}
	info, ok := runtime.SerializerInfoForMediaType(ws.s.codecs.factory.SupportedMediaTypes(), ws.t.mediaType)
	if !ok || info.StreamSerializer == nil {
		return fmt.Errorf("no stream serializer for %s", ws.t.mediaType)
	}
	fw := info.StreamSerializer.Framer.NewFrameWriter(ws.w)
	if err := info.StreamSerializer.Serializer.Encode(ev, fw); err != nil {
		return fmt.Errorf("writing watch event: %w", err)
	}
	return nil
}

func objectKey(obj runtime.Object) types.NamespacedName {
	m, err := meta.Accessor(obj)
	if err != nil {
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
}

func resourceVersion(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}
