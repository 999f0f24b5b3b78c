package debroot

import (
	"strings"
	"testing"
)

func TestAptMirror(t *testing.T) {
	const deb822 = `Types: deb
# a comment: the snapshot
URIs: http://mirror.test/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.test/debian-security
Suites: bookworm-security
Components: main
`
	tests := []struct {
		name          string
		lists, deb822 []string
		want          string
	}{
		{"one-line", []string{"# deb http://old.test/debian bookworm main\ndeb http://mirror.test/debian bookworm main\n"}, nil, "http://mirror.test/debian"},
		{"one-line with options", []string{"deb [arch=amd64 signed-by=/k.gpg] http://mirror.test/debian bookworm main\n"}, nil, "http://mirror.test/debian"},
		{"deb-src only", []string{"deb-src http://mirror.test/debian bookworm main\n"}, nil, ""},
		{"deb822", nil, []string{deb822}, "http://mirror.test/debian"},
		{"deb822, another suite", nil, []string{strings.ReplaceAll(deb822, "bookworm", "trixie")}, ""},
		{"deb822 disabled", nil, []string{"Enabled: no\n" + deb822}, ""},
		{"security suite is not the suite", []string{"deb http://mirror.test/debian-security bookworm-security main\n"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := aptMirror(tt.lists, tt.deb822, "bookworm"); got != tt.want {
				t.Errorf("aptMirror(%q, %q, bookworm) = %q, want %q", tt.lists, tt.deb822, got, tt.want)
			}
		})
	}
}
