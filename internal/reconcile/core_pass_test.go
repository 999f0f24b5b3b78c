package reconcile

import (
	"strings"
	"testing"
	"time"
)

// TestPassStages follows where a pass stands, input by input, through a
// pod's first start and its removal.
func TestPassStages(t *testing.T) {
	p := withUID(mkPod(t, podSpec{apps: []string{"a"}}), "1")
	sb := freshSb(p, "sb1", 0)
	a := startedAt(ctr(p, "sb1", "a", "a-1", 0), 0)
	up := upSb(sb, 0)
	pl := &player{t: t, c: newCore(p.Key(), testBackoff, []string{"10.0.0.5"}), now: t0}
	pl.c.setDesired(p)
	for i, tt := range []struct {
		in input
		at stage
	}{
		{beginAt(0), atSyncList},
		{ls(), atSyncCreate},
		{made(sb), atConvCheckImage},
		{checked(true), atConvPullReport},
		{ls(sb), atConvPull},
		{pullOK(time.Second), atConvStart},
		{startOK(a), atSyncStartLater},
		{sbStarted(up), atSyncReport},
		{ls(up, a), idle},
		{desire{nil}, idle},
		{beginAt(10 * sec), atRemoveList},
		{ls(up, a), atRemoveStop},
		{stopOK(), atRemoveFiles},
		{filesOK("uid1"), idle},
	} {
		pl.feedSafely(tt.in)
		if got := pl.c.pass.at; got != tt.at {
			t.Errorf("after input %d (%s) the pass stands at %q, want %q", i+1, describe(tt.in), got, tt.at)
		}
	}
}

// TestPassWrongOutcome checks that an outcome the pass does not wait for
// ends it with an error that says where it stood.
func TestPassWrongOutcome(t *testing.T) {
	p := withUID(mkPod(t, podSpec{apps: []string{"a"}}), "1")
	c := newCore(p.Key(), testBackoff, []string{"10.0.0.5"})
	c.setDesired(p)
	c.begin(t0)
	acts := c.step(sandboxMade{}, t0)
	f, ok := acts[len(acts)-1].(finish)
	if !ok || f.err == nil || !strings.Contains(f.err.Error(), `outcome reconcile.sandboxMade does not answer the pass at sync: list`) {
		t.Errorf("step(sandboxMade) while listing = %v, want a finish with an error", acts)
	}
	if c.pass.at != idle {
		t.Errorf("after the wrong outcome the pass stands at %q, want idle", c.pass.at)
	}
}

// TestStageNames checks that every stage prints a name of its own.
func TestStageNames(t *testing.T) {
	seen := map[string]stage{}
	for s := idle; s <= atHaltReport; s++ {
		name := s.String()
		if strings.HasPrefix(name, "stage(") {
			t.Errorf("stage %d has no name", int(s))
		}
		if o, dup := seen[name]; dup {
			t.Errorf("stages %d and %d are both named %q", int(o), int(s), name)
		}
		seen[name] = s
	}
	if got := stage(len(stageNames)).String(); got != "stage(26)" {
		t.Errorf("an unknown stage prints as %q, want stage(26)", got)
	}
}
