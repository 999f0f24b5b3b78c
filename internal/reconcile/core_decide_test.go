package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// t0 is the time the pure tests count from.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

var testBackoff = Backoff{Initial: time.Second, Max: 10 * time.Second, Reset: time.Minute}

func TestBackoffDelay(t *testing.T) {
	tests := []struct {
		name  string
		b     Backoff
		level int
		want  time.Duration
	}{
		{"negative level is immediate", testBackoff, -1, 0},
		{"first restart is immediate", testBackoff, 0, 0},
		{"second waits Initial", testBackoff, 1, time.Second},
		{"then doubles", testBackoff, 2, 2 * time.Second},
		{"and doubles again", testBackoff, 3, 4 * time.Second},
		{"just under Max", testBackoff, 4, 8 * time.Second},
		{"capped at Max", testBackoff, 5, 10 * time.Second},
		{"stays at Max", testBackoff, 50, 10 * time.Second},
		{"huge level does not overflow", testBackoff, 1 << 20, 10 * time.Second},
		{"Initial above Max is capped", Backoff{Initial: time.Minute, Max: 10 * time.Second}, 1, 10 * time.Second},
		{"defaults reach 5m after nine tries", Backoff{Initial: time.Second, Max: 5 * time.Minute}, 9, 256 * time.Second},
		{"defaults capped at the tenth", Backoff{Initial: time.Second, Max: 5 * time.Minute}, 10, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.level); got != tt.want {
				t.Errorf("%+v.Delay(%d) = %v, want %v", tt.b, tt.level, got, tt.want)
			}
		})
	}
}

func TestBackoffNext(t *testing.T) {
	type exit struct {
		id       string
		ran      time.Duration // how long it ran
		finished time.Duration // since t0
	}
	tests := []struct {
		name      string
		exits     []exit
		wantUntil time.Duration // since t0, for the last exit
		wantLevel int
	}{
		{
			name:      "first exit restarts at once",
			exits:     []exit{{"a", time.Second, 10 * time.Second}},
			wantUntil: 10 * time.Second,
			wantLevel: 1,
		},
		{
			name:      "second exit waits Initial",
			exits:     []exit{{"a", time.Second, 10 * time.Second}, {"b", time.Second, 12 * time.Second}},
			wantUntil: 13 * time.Second,
			wantLevel: 2,
		},
		{
			name: "delays double up to Max",
			exits: []exit{
				{"a", time.Second, 1 * time.Second},
				{"b", time.Second, 2 * time.Second},
				{"c", time.Second, 3 * time.Second},
				{"d", time.Second, 4 * time.Second},
				{"e", time.Second, 5 * time.Second},
				{"f", time.Second, 6 * time.Second},
				{"g", time.Second, 7 * time.Second},
			},
			wantUntil: 17 * time.Second,
			wantLevel: 7,
		},
		{
			name:      "same exit counted twice changes nothing",
			exits:     []exit{{"a", time.Second, 10 * time.Second}, {"b", time.Second, 12 * time.Second}, {"b", time.Second, 12 * time.Second}},
			wantUntil: 13 * time.Second,
			wantLevel: 2,
		},
		{
			name:      "same exit seen later with other times changes nothing",
			exits:     []exit{{"a", time.Second, 10 * time.Second}, {"b", time.Second, 12 * time.Second}, {"b", time.Hour, 99 * time.Second}},
			wantUntil: 13 * time.Second,
			wantLevel: 2,
		},
		{
			name: "a run of Reset starts over",
			exits: []exit{
				{"a", time.Second, 1 * time.Second},
				{"b", time.Second, 2 * time.Second},
				{"c", time.Second, 4 * time.Second},
				{"d", time.Minute, 70 * time.Second},
			},
			wantUntil: 70 * time.Second,
			wantLevel: 1,
		},
		{
			name: "a run just under Reset does not",
			exits: []exit{
				{"a", time.Second, 1 * time.Second},
				{"b", time.Second, 2 * time.Second},
				{"c", time.Minute - time.Nanosecond, 70 * time.Second},
			},
			wantUntil: 72 * time.Second,
			wantLevel: 3,
		},
		{
			name: "after a reset the next exit waits Initial",
			exits: []exit{
				{"a", time.Second, 1 * time.Second},
				{"b", time.Second, 2 * time.Second},
				{"c", time.Hour, 4000 * time.Second},
				{"d", time.Second, 4002 * time.Second},
			},
			wantUntil: 4003 * time.Second,
			wantLevel: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s streak
			var got time.Time
			for _, e := range tt.exits {
				finished := t0.Add(e.finished)
				got = testBackoff.next(&s, e.id, finished.Add(-e.ran), finished)
			}
			if want := t0.Add(tt.wantUntil); !got.Equal(want) || s.level != tt.wantLevel {
				t.Errorf("next after %v = %v (level %d), want %v (level %d)", tt.exits, got.Sub(t0), s.level, tt.wantUntil, tt.wantLevel)
			}
		})
	}
}

func TestRestarts(t *testing.T) {
	tests := []struct {
		policy v1.RestartPolicy
		code   int32
		want   bool
	}{
		{v1.RestartPolicyAlways, 0, true},
		{v1.RestartPolicyAlways, 1, true},
		{v1.RestartPolicyAlways, 143, true},
		{v1.RestartPolicyOnFailure, 0, false},
		{v1.RestartPolicyOnFailure, 1, true},
		{v1.RestartPolicyOnFailure, 137, true},
		{v1.RestartPolicyNever, 0, false},
		{v1.RestartPolicyNever, 1, false},
		{"", 1, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.policy, tt.code), func(t *testing.T) {
			if got := restarts(tt.policy, tt.code); got != tt.want {
				t.Errorf("restarts(%q, %d) = %v, want %v", tt.policy, tt.code, got, tt.want)
			}
		})
	}
}

func TestInitPolicy(t *testing.T) {
	tests := []struct{ in, want v1.RestartPolicy }{
		{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure},
		{v1.RestartPolicyOnFailure, v1.RestartPolicyOnFailure},
		{v1.RestartPolicyNever, v1.RestartPolicyNever},
	}
	for _, tt := range tests {
		if got := initPolicy(tt.in); got != tt.want {
			t.Errorf("initPolicy(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// exited is a record of container c that ran from started to finished
// (offsets from t0) and exited with code.
func exited(c *v1.Container, id string, attempt int, code int32, started, finished time.Duration) pod.Record {
	return pod.Record{
		ID: id, Kind: pod.KindApp, Name: c.Name, Hash: pod.ContainerHash(c), Attempt: attempt, SandboxID: "sb",
		State: pod.TaskExited, CreatedAt: t0.Add(started), StartedAt: t0.Add(started), FinishedAt: t0.Add(finished), ExitCode: code,
	}
}

func running(c *v1.Container, id string, attempt int) pod.Record {
	return pod.Record{
		ID: id, Kind: pod.KindApp, Name: c.Name, Hash: pod.ContainerHash(c), Attempt: attempt, SandboxID: "sb",
		State: pod.TaskRunning, CreatedAt: t0, StartedAt: t0,
	}
}

func TestDecideContainer(t *testing.T) {
	c := &v1.Container{Name: "app", Image: "busybox:1"}
	old := &v1.Container{Name: "app", Image: "busybox:0"}
	created := running(c, "c9", 4)
	created.State = pod.TaskCreated
	now := t0.Add(time.Minute)

	tests := []struct {
		name   string
		recs   []pod.Record
		policy v1.RestartPolicy
		streak streak // before the call
		want   step
	}{
		{"no records starts", nil, v1.RestartPolicyAlways, streak{}, step{kind: stepStart}},
		{"running same hash", []pod.Record{running(c, "c1", 0)}, v1.RestartPolicyAlways, streak{}, step{kind: stepNone}},
		{"running different hash is replaced", []pod.Record{running(old, "c1", 3)}, v1.RestartPolicyAlways, streak{},
			step{kind: stepReplace, id: "c1", attempt: 4}},
		{"exited different hash is replaced under Never", []pod.Record{exited(old, "c1", 0, 0, 0, time.Second)}, v1.RestartPolicyNever, streak{},
			step{kind: stepReplace, id: "c1", attempt: 1}},
		{"created but never ran is cleared", []pod.Record{created}, v1.RestartPolicyAlways, streak{},
			step{kind: stepClear, id: "c9", attempt: 4}},
		{"Always exit 0 first restart at once", []pod.Record{exited(c, "c1", 0, 0, 0, 50*time.Second)}, v1.RestartPolicyAlways, streak{},
			step{kind: stepStart, attempt: 1}},
		{"Always exit 1 first restart at once", []pod.Record{exited(c, "c1", 0, 1, 0, 50*time.Second)}, v1.RestartPolicyAlways, streak{},
			step{kind: stepStart, attempt: 1}},
		{"OnFailure exit 0 stays", []pod.Record{exited(c, "c1", 0, 0, 0, 50*time.Second)}, v1.RestartPolicyOnFailure, streak{}, step{kind: stepNone}},
		{"OnFailure exit 1 restarts", []pod.Record{exited(c, "c1", 2, 1, 0, 50*time.Second)}, v1.RestartPolicyOnFailure, streak{},
			step{kind: stepStart, attempt: 3}},
		{"Never exit 0 stays", []pod.Record{exited(c, "c1", 0, 0, 0, 50*time.Second)}, v1.RestartPolicyNever, streak{}, step{kind: stepNone}},
		{"Never exit 1 stays", []pod.Record{exited(c, "c1", 0, 1, 0, 50*time.Second)}, v1.RestartPolicyNever, streak{}, step{kind: stepNone}},
		{"in backoff waits", []pod.Record{exited(c, "c2", 1, 1, 50*time.Second, 58*time.Second)}, v1.RestartPolicyAlways,
			streak{level: 3, exit: "c1"}, step{kind: stepWait, attempt: 2, until: t0.Add(62 * time.Second)}},
		{"backoff over starts", []pod.Record{exited(c, "c2", 1, 1, 50*time.Second, 55*time.Second)}, v1.RestartPolicyAlways,
			streak{level: 3, exit: "c1"}, step{kind: stepStart, attempt: 2}},
		{"backoff ending exactly now starts", []pod.Record{exited(c, "c2", 1, 1, 50*time.Second, 56*time.Second)}, v1.RestartPolicyAlways,
			streak{level: 3, exit: "c1"}, step{kind: stepStart, attempt: 2}},
		{"same exit seen again keeps its deadline", []pod.Record{exited(c, "c2", 1, 1, 50*time.Second, 59*time.Second)}, v1.RestartPolicyAlways,
			streak{level: 4, exit: "c2", until: t0.Add(61 * time.Second)}, step{kind: stepWait, attempt: 2, until: t0.Add(61 * time.Second)}},
		{"only the newest record counts", []pod.Record{running(c, "c3", 2), exited(c, "c2", 1, 1, 0, time.Second)}, v1.RestartPolicyAlways,
			streak{}, step{kind: stepNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.streak
			got := decideContainer(c, tt.recs, tt.policy, testBackoff, &s, now)
			if got != tt.want {
				t.Errorf("decideContainer(%s) = %+v, want %+v", tt.name, got, tt.want)
			}
		})
	}
}

// TestDecideContainerBackoffSequence feeds decideContainer one crash after
// another, as a worker would, and checks the waits grow and the streak
// counts each exit once.
func TestDecideContainerBackoffSequence(t *testing.T) {
	c := &v1.Container{Name: "app", Image: "busybox:1"}
	var s streak
	now := t0
	var waits []time.Duration
	for attempt := range 6 {
		id := fmt.Sprintf("c%d", attempt)
		rec := exited(c, id, attempt, 1, now.Sub(t0), now.Sub(t0))
		// Decided several times, as resyncs and exits make the worker look again.
		var st step
		for range 3 {
			st = decideContainer(c, []pod.Record{rec}, v1.RestartPolicyAlways, testBackoff, &s, now)
		}
		switch st.kind {
		case stepStart:
			waits = append(waits, 0)
		case stepWait:
			waits = append(waits, st.until.Sub(now))
			now = st.until
			if got := decideContainer(c, []pod.Record{rec}, v1.RestartPolicyAlways, testBackoff, &s, now); got.kind != stepStart {
				t.Fatalf("decideContainer at the deadline = %+v, want a start", got)
			}
		default:
			t.Fatalf("decideContainer(exit %d) = %+v, want a start or a wait", attempt, st)
		}
		if st.attempt != attempt+1 {
			t.Errorf("decideContainer(exit %d).attempt = %d, want %d", attempt, st.attempt, attempt+1)
		}
	}
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second}
	if !slices.Equal(waits, want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
}

func TestNewView(t *testing.T) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	recs := []pod.Record{
		{ID: "a1", Name: "a", Attempt: 1, SandboxID: "s2", CreatedAt: at(5)},
		{ID: "s1", Kind: pod.KindSandbox, CreatedAt: at(1)},
		{ID: "a0", Name: "a", Attempt: 0, SandboxID: "s1", CreatedAt: at(2)},
		{ID: "s3", Kind: pod.KindSandbox, CreatedAt: at(9)},
		{ID: "b0", Name: "b", Attempt: 0, SandboxID: "s2", CreatedAt: at(3)},
		{ID: "a2", Name: "a", Attempt: 2, SandboxID: "s2", CreatedAt: at(4)}, // newer attempt, older clock
		{ID: "s2", Kind: pod.KindSandbox, CreatedAt: at(3)},
		{ID: "b0x", Name: "b", Attempt: 0, SandboxID: "s2", CreatedAt: at(7)}, // same attempt: newer first
	}
	v := newView(recs)
	ids := func(rs []pod.Record) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"sandboxes newest first", ids(v.sandboxes), "s3,s2,s1"},
		{"byName a newest attempt first", ids(v.byName["a"]), "a2,a1,a0"},
		{"byName b same attempt newest first", ids(v.byName["b"]), "b0x,b0"},
		{"in s2 a", ids(v.in("s2", "a")), "a2,a1"},
		{"in s1 a", ids(v.in("s1", "a")), "a0"},
		{"in s1 b", ids(v.in("s1", "b")), ""},
		{"in s2 missing name", ids(v.in("s2", "zzz")), ""},
		{"stale keeping s2", sortedIDs(v.stale("s2")), "a0,s1,s3"},
		{"stale keeping s1", sortedIDs(v.stale("s1")), "a1,a2,b0,b0x,s2,s3"},
		{"stale keeping nothing", sortedIDs(v.stale("")), "a0,a1,a2,b0,b0x,s1,s2,s3"},
		{"stale keeping unknown", sortedIDs(v.stale("nope")), "a0,a1,a2,b0,b0x,s1,s2,s3"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if got := newView(nil); len(got.sandboxes) != 0 || len(got.byName) != 0 || len(got.stale("")) != 0 {
		t.Errorf("newView(nil) = %+v, want empty", got)
	}
}

func sortedIDs(rs []pod.Record) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestViewCurrentAndLatest(t *testing.T) {
	p := &pod.Pod{SandboxHash: "h2"}
	v := newView([]pod.Record{
		{ID: "s1", Kind: pod.KindSandbox, Hash: "h1", CreatedAt: t0.Add(3)},
		{ID: "s2", Kind: pod.KindSandbox, Hash: "h2", CreatedAt: t0.Add(1), State: pod.TaskExited},
		{ID: "s3", Kind: pod.KindSandbox, Hash: "h2", CreatedAt: t0.Add(2), State: pod.TaskRunning},
		{ID: "a1", Name: "a", Attempt: 1, SandboxID: "s2"},
		{ID: "a0", Name: "a", Attempt: 0, SandboxID: "s3"},
	})
	if sb, ok := v.current(p); !ok || sb.ID != "s3" {
		t.Errorf("current(h2) = %s, %v, want s3, true", sb.ID, ok)
	}
	if sb, ok := v.current(&pod.Pod{SandboxHash: "h9"}); ok {
		t.Errorf("current(h9) = %s, true, want none", sb.ID)
	}
	tests := []struct {
		sb, name, want string
	}{
		{"", "a", "a1"},
		{"s3", "a", "a0"},
		{"s2", "a", "a1"},
		{"s1", "a", ""},
		{"", "b", ""},
	}
	for _, tt := range tests {
		got := ""
		if r := v.latest(tt.sb, tt.name); r != nil {
			got = r.ID
		}
		if got != tt.want {
			t.Errorf("latest(%q, %q) = %q, want %q", tt.sb, tt.name, got, tt.want)
		}
	}
}
