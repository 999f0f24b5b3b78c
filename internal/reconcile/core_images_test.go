package reconcile

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestRunImagesArrived: a container waiting for its image starts as soon
// as the image arrives, not when its backoff ends; one waiting for another
// image keeps waiting out its backoff.
func TestRunImagesArrived(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}, imageOf: map[string]string{"a": "localhost/imported:v1", "b": "other:v1"}})
		arrived := make(chan []string)
		h := newHarness(t, Config{ImagesArrived: arrived})
		h.rt.setStartErr("a", &pod.WaitingError{Reason: "ErrImagePull", Err: errors.New("pulling image: no registry")})
		h.rt.setStartErr("b", &pod.WaitingError{Reason: "ErrImageNeverPull", Err: errors.New("not present")})
		h.set(p)
		// Failures at 0, 1s, 3s, 7s, 15s: the next retry is 16s after the last.
		h.sleep(16 * time.Second)
		if cs := containerStatusOf(t, h.status(p), "a"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "ImagePullBackOff" {
			t.Fatalf("a: %s, want waiting ImagePullBackOff", stateString(cs.State))
		}

		h.rt.setStartErr("a", nil)
		m := h.mark()
		arrived <- []string{"docker.io/library/unrelated:v1"}
		synctest.Wait()
		if ops := h.ops(m, "start"); len(ops) != 0 {
			t.Errorf("after an unrelated image arrived: %v, want no start", ops)
		}
		arrived <- []string{"localhost/imported:v1", "docker.io/library/unrelated:v1"}
		synctest.Wait()
		h.wantOps(m, "start app a#0")
		if cs := containerStatusOf(t, h.status(p), "a"); cs.State.Running == nil {
			t.Errorf("a: %s, want running once its image arrived", stateString(cs.State))
		}
		if cs := containerStatusOf(t, h.status(p), "b"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "ErrImageNeverPull" {
			t.Errorf("b: %s, want still waiting ErrImageNeverPull", stateString(cs.State))
		}
	})
}
