package filewatch

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// content returns the digest of a path whose content is s; "" stands for
// a path that does not exist.
func content(s string) digest {
	if s == "" {
		return digest{}
	}
	return digest{present: true, sum: sha256.Sum256([]byte(s))}
}

func TestTrackerDebounce(t *testing.T) {
	const debounce = 30 * time.Millisecond // maxWait 300ms
	tests := []struct {
		name   string
		events []int // ms after t0
		want   int   // ms after t0 the path is due
	}{
		{name: "one event", events: []int{0}, want: 30},
		{name: "a burst settles", events: []int{0, 10, 20}, want: 50},
		{name: "endless writes wait at most maxWait", events: []int{0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300, 320}, want: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(debounce)
			tr.set(pod.Key{Namespace: "default", Name: "p"}, []pod.WatchTarget{{Container: "c", Path: "/f"}})
			for _, e := range tt.events {
				tr.touch("/f", ms(e))
			}
			at, ok := tr.next()
			if !ok || !at.Equal(ms(tt.want)) {
				t.Fatalf("next() = %v, %v, want %v", at.Sub(t0), ok, time.Duration(tt.want)*time.Millisecond)
			}
			if got := tr.take(ms(tt.want - 1)); len(got) != 0 {
				t.Errorf("take(1ms early) = %q, want nothing", got)
			}
			if got := tr.take(ms(tt.want)); !slices.Equal(got, []string{"/f"}) {
				t.Errorf("take(due) = %q, want [/f]", got)
			}
			if at, ok := tr.next(); ok {
				t.Errorf("next() after take = %v, want nothing due", at.Sub(t0))
			}
		})
	}
}

func TestTrackerTakeOrderAndResync(t *testing.T) {
	tr := newTracker(30 * time.Millisecond)
	tr.set(pod.Key{Namespace: "default", Name: "p"}, []pod.WatchTarget{
		{Container: "c", Path: "/a"}, {Container: "c", Path: "/b"}, {Container: "c", Path: "/c"},
	})
	tr.touch("/c", ms(0))
	tr.touch("/a", ms(5))
	tr.resync(ms(10)) // /b only: /a and /c wait for their bursts
	if got, want := tr.take(ms(32)), []string{"/b", "/c"}; !slices.Equal(got, want) {
		t.Errorf("take(32ms) = %q, want %q (earliest due first)", got, want)
	}
	if got, want := tr.take(ms(32)), []string(nil); !slices.Equal(got, want) {
		t.Errorf("take(32ms) again = %q, want %q", got, want)
	}
	if got, want := tr.take(ms(35)), []string{"/a"}; !slices.Equal(got, want) {
		t.Errorf("take(35ms) = %q, want %q", got, want)
	}
}

func TestTrackerObserve(t *testing.T) {
	tests := []struct {
		name string
		// seen are the successive fingerprints of the path, the first
		// the baseline; want marks with "!" those that are a change and
		// with "gone" those that report the path gone.
		seen []string
		want []string
	}{
		{name: "same content", seen: []string{"a", "a", "a"}, want: []string{"", "", ""}},
		{name: "new content", seen: []string{"a", "b", "b", "c"}, want: []string{"", "!", "", "!"}},
		{name: "missing, then appears", seen: []string{"", "", "a"}, want: []string{"", "", "!"}},
		{name: "gone is no change", seen: []string{"a", "", ""}, want: []string{"", "gone", ""}},
		{name: "back with the same content", seen: []string{"a", "", "a"}, want: []string{"", "gone", ""}},
		{name: "back with other content", seen: []string{"a", "", "b"}, want: []string{"", "gone", "!"}},
		{name: "changed while gone and back", seen: []string{"a", "", "b", "", "b", "a"}, want: []string{"", "gone", "!", "gone", "", "!"}},
	}
	key := pod.Key{Namespace: "default", Name: "p"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(time.Second)
			tr.set(key, []pod.WatchTarget{{Container: "c", Path: "/f"}})
			for i, s := range tt.seen {
				changes, gone := tr.observe("/f", content(s), ms(i))
				got := ""
				switch {
				case gone:
					got = "gone"
				case len(changes) == 1:
					got = "!"
					if want := (pod.FileChange{Pod: key, Container: "c", Path: "/f", Time: ms(i)}); changes[0] != want {
						t.Errorf("observe #%d = %+v, want %+v", i, changes[0], want)
					}
				case len(changes) > 1:
					got = fmt.Sprintf("%d changes", len(changes))
				}
				if got != tt.want[i] {
					t.Errorf("observe #%d (%q) after %q = %q, want %q", i, s, tt.seen[:i], got, tt.want[i])
				}
			}
		})
	}
}

func TestTrackerSet(t *testing.T) {
	p, q := pod.Key{Namespace: "default", Name: "p"}, pod.Key{Namespace: "default", Name: "q"}
	tr := newTracker(time.Second)
	type step struct {
		key                pod.Key
		targets            string // "container:path,..."
		added, removed     string
		subscribersOfPathA string
	}
	steps := []step{
		{key: p, targets: "c:/a,d:/a/,c:/b", added: "/a,/b", subscribersOfPathA: "default/p/c,default/p/d"},
		{key: q, targets: "c:/a", subscribersOfPathA: "default/p/c,default/p/d,default/q/c"},
		{key: p, targets: "c:/b", subscribersOfPathA: "default/q/c"},
		{key: p, targets: "c:/b", subscribersOfPathA: "default/q/c"},
		{key: q, targets: "", removed: "/a"},
		{key: p, targets: "", removed: "/b"},
	}
	for i, s := range steps {
		var targets []pod.WatchTarget
		for _, t := range strings.Split(s.targets, ",") {
			if c, path, ok := strings.Cut(t, ":"); ok {
				targets = append(targets, pod.WatchTarget{Container: c, Path: path})
			}
		}
		added, removed := tr.set(s.key, targets)
		if got := strings.Join(added, ","); got != s.added {
			t.Errorf("step %d: set(%s, %s) added %q, want %q", i, s.key, s.targets, got, s.added)
		}
		if got := strings.Join(removed, ","); got != s.removed {
			t.Errorf("step %d: set(%s, %s) removed %q, want %q", i, s.key, s.targets, got, s.removed)
		}
		var subs []string
		if ps := tr.paths["/a"]; ps != nil {
			for sub := range ps.subs {
				subs = append(subs, sub.pod.String()+"/"+sub.container)
			}
		}
		slices.Sort(subs)
		if got := strings.Join(subs, ","); got != s.subscribersOfPathA {
			t.Errorf("step %d: subscribers of /a = %q, want %q", i, got, s.subscribersOfPathA)
		}
	}
	if len(tr.paths) != 0 || len(tr.pods) != 0 {
		t.Errorf("after every pod stopped: %d paths, %d pods left", len(tr.paths), len(tr.pods))
	}
}
