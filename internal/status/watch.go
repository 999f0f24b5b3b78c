package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/staticlet/staticlet/internal/pod"
)

// WatchEventType is the type of a line of a watch stream, as in the
// Kubernetes watch API.
type WatchEventType string

// The types of watch events. ADDED, MODIFIED and DELETED carry a pod;
// BOOKMARK, sent only when the request asks for bookmarks
// (allowWatchBookmarks=true), marks the end of the initial state; ERROR ends
// a stream that cannot go on.
const (
	WatchAdded    WatchEventType = "ADDED"
	WatchModified WatchEventType = "MODIFIED"
	WatchDeleted  WatchEventType = "DELETED"
	WatchBookmark WatchEventType = "BOOKMARK"
	WatchError    WatchEventType = "ERROR"
)

// InitialEventsEnd is the annotation of the BOOKMARK that follows the
// initial ADDED events of a pod watch, as the apiserver marks it.
const InitialEventsEnd = "k8s.io/initial-events-end"

// PodWatchEvent is one line of GET /pods?watch=true: a change of one pod,
// in the shape of a Kubernetes watch event.
type PodWatchEvent struct {
	Type WatchEventType `json:"type"`
	// Object is the pod after the change; for DELETED, its last state;
	// for BOOKMARK, a pod with only the InitialEventsEnd annotation.
	Object *v1.Pod `json:"object"`
}

// parseSelector parses the labelSelector parameter of r; an absent one
// selects everything.
func parseSelector(r *http.Request) (labels.Selector, error) {
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		return nil, fmt.Errorf("invalid labelSelector: %w", err)
	}
	return sel, nil
}

// serveWatch handles the watch parameters of r (watch and
// allowWatchBookmarks): it answers 400 to invalid ones, and calls watch
// when r asks for a watch. It reports whether it answered r.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, watch func(bookmarks bool)) bool {
	q := r.URL.Query()
	var on, bookmarks bool
	for name, dst := range map[string]*bool{"watch": &on, "allowWatchBookmarks": &bookmarks} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				s.writeError(w, r, http.StatusBadRequest, "invalid %s %q: want true or false", name, v)
				return true
			}
			*dst = b
		}
	}
	if on {
		watch(bookmarks)
	}
	return on
}

// selectPods returns the pods that sel selects.
func selectPods(pods []v1.Pod, sel labels.Selector) []v1.Pod {
	if sel.Empty() {
		return pods
	}
	out := pods[:0]
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// podWatcher turns a subscription's pod changes into watch events for one
// watcher. It is the pure part of a pod watch: it remembers what it sent.
type podWatcher struct {
	sel labels.Selector
	// sent holds, for each pod the watcher was told of and not yet of its
	// deletion, the object last sent and its JSON.
	sent map[pod.Key]sentPod
}

type sentPod struct {
	pod  *v1.Pod
	json []byte
}

func newPodWatcher(sel labels.Selector) *podWatcher {
	return &podWatcher{sel: sel, sent: make(map[pod.Key]sentPod)}
}

// next returns the watch event for change c, and false when there is none
// to send: the pod is not selected and was not before, or nothing visible
// changed. A pod that stops matching the selector is DELETED for the
// watcher, and one that starts matching is ADDED, as in the apiserver.
func (w *podWatcher) next(c PodChange) (PodWatchEvent, bool) {
	prev, known := w.sent[c.Key]
	if c.Pod == nil || !w.sel.Matches(labels.Set(c.Pod.Labels)) {
		if !known {
			return PodWatchEvent{}, false
		}
		delete(w.sent, c.Key)
		return PodWatchEvent{Type: WatchDeleted, Object: prev.pod}, true
	}
	b, err := json.Marshal(c.Pod)
	if err != nil {
		b = nil // never equal: sent again, where encoding reports the error
	}
	if known && b != nil && bytes.Equal(b, prev.json) {
		return PodWatchEvent{}, false
	}
	w.sent[c.Key] = sentPod{pod: c.Pod, json: b}
	if known {
		return PodWatchEvent{Type: WatchModified, Object: c.Pod}, true
	}
	return PodWatchEvent{Type: WatchAdded, Object: c.Pod}, true
}

// lineWriter writes JSON lines to a streaming response, flushing after
// each batch.
type lineWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc *json.Encoder
}

// startStream sends the 200 header of a stream of JSON lines.
func startStream(w http.ResponseWriter) (*lineWriter, error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{w: w, rc: http.NewResponseController(w), enc: json.NewEncoder(w)}
	return lw, lw.flush()
}

// write encodes v as one line (json.Encoder ends each value with a newline).
func (lw *lineWriter) write(v any) error {
	if err := lw.enc.Encode(v); err != nil {
		return fmt.Errorf("writing watch event: %w", err)
	}
	return nil
}

func (lw *lineWriter) flush() error {
	if err := lw.rc.Flush(); err != nil {
		return fmt.Errorf("flushing watch stream: %w", err)
	}
	return nil
}

// stream runs one watch: it subscribes to the store, sends the header of
// the response, then calls batch with each signal of the subscription
// (first with initial true, at once) and flushes what it wrote, until the
// client goes away, the server stops, or batch fails.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, batch func(sub *Subscription, lw *lineWriter, initial bool) error) {
	sub := s.cfg.Store.Subscribe()
	defer sub.Close()
	lw, err := startStream(w)
	if err != nil {
		return
	}
	for initial := true; ; initial = false {
		select {
		case <-r.Context().Done():
			return
		case <-sub.Changed():
		}
		err := batch(sub, lw, initial)
		if err == nil {
			err = lw.flush()
		}
		if err != nil {
			s.log.Debug("watch ended", "path", r.URL.Path, "err", err)
			return
		}
	}
}

// watchPods streams pod changes: ADDED for every selected pod first (then
// a BOOKMARK if asked for), then one event per visible change.
func (s *Server) watchPods(w http.ResponseWriter, r *http.Request, sel labels.Selector, bookmarks bool) {
	pw := newPodWatcher(sel)
	s.stream(w, r, func(sub *Subscription, lw *lineWriter, initial bool) error {
		for _, c := range sub.PodChanges() {
			if ev, ok := pw.next(c); ok {
				if err := lw.write(ev); err != nil {
					return err
				}
			}
		}
		if !initial || !bookmarks {
			return nil
		}
		mark := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{InitialEventsEnd: "true"}}}
		mark.APIVersion, mark.Kind = "v1", "Pod"
		return lw.write(PodWatchEvent{Type: WatchBookmark, Object: mark})
	})
}

// errExpired ends an event watch that fell behind.
var errExpired = errors.New("the watch fell behind")

// watchEvents streams the events of the pods podFilter selects (see
// Store.Events): those the store keeps first, then a BOOKMARK if asked for,
// then each new one. A watcher that fell so far behind that the store
// dropped events it had not sent gets an ERROR line, and the stream ends.
func (s *Server) watchEvents(w http.ResponseWriter, r *http.Request, podFilter string, bookmarks bool) {
	s.stream(w, r, func(sub *Subscription, lw *lineWriter, initial bool) error {
		events, lost := sub.Events()
		if lost > 0 {
			msg := fmt.Sprintf("the watch fell behind and %d events were dropped before it read them: watch again", lost)
			if err := lw.write(pod.Event{Type: string(WatchError), Reason: "Expired", Message: msg}); err != nil {
				return err
			}
			lw.flush()
			return errExpired
		}
		for _, e := range events {
			if matchPod(e.Pod, podFilter) {
				if err := lw.write(e); err != nil {
					return err
				}
			}
		}
		if !initial || !bookmarks {
			return nil
		}
		return lw.write(pod.Event{Type: string(WatchBookmark), Reason: "InitialEventsEnd"})
	})
}
