package spec

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestTerminationMount(t *testing.T) {
	const host = "/var/lib/staticlet/pods/u/containers/c/id"
	tests := []struct {
		name, extra, podExtra string
		file                  string
		want                  string // destination of the bind; empty for none
	}{
		{name: "default path", file: host, want: "/dev/termination-log"},
		{name: "custom path", extra: "    terminationMessagePath: /tmp/msg\n", file: host, want: "/tmp/msg"},
		{name: "no file", file: ""},
		{
			name:     "a volume at the path wins",
			extra:    "    terminationMessagePath: /msg/log\n    volumeMounts:\n    - name: v\n      mountPath: /msg/log\n",
			podExtra: "  volumes:\n  - name: v\n    emptyDir: {}\n",
			file:     host,
		},
		{
			name:     "inside a volume, bound after it",
			extra:    "    terminationMessagePath: /msg/log\n    volumeMounts:\n    - name: v\n      mountPath: /msg\n",
			podExtra: "  volumes:\n  - name: v\n    emptyDir: {}\n",
			file:     host,
			want:     "/msg/log",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, tt.extra, tt.podExtra)
			s := mustContainer(t, p, ContainerOptions{
				Image:           ImageConfig{Cmd: []string{"sh"}},
				Volumes:         map[string]string{"v": "/var/lib/staticlet/pods/u/volumes/empty-dir/v"},
				TerminationFile: tt.file,
			})
			var got []specs.Mount
			for _, m := range s.Mounts {
				if m.Source == host {
					got = append(got, m)
				}
			}
			if tt.want == "" {
				if len(got) != 0 {
					t.Errorf("Container() binds the termination file: %+v, want no such mount", got)
				}
				return
			}
			if len(got) != 1 || got[0].Destination != tt.want || got[0].Type != "bind" || got[0].Options[len(got[0].Options)-1] != "rw" {
				t.Fatalf("Container() termination mounts = %+v, want one read-write bind at %s", got, tt.want)
			}
			if last := s.Mounts[len(s.Mounts)-1]; last.Source != host {
				t.Errorf("Container() last mount = %+v, want the termination file after the volumes", last)
			}
		})
	}
}
