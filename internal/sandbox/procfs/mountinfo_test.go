package procfs

import "testing"

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/sys/fs/cgroup/cpu`: "/sys/fs/cgroup/cpu", `/a\040b`: "/a b", `/x\`: `/x\`} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("UnescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
