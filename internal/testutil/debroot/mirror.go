package debroot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HostCodename is the host's Debian release (VERSION_CODENAME).
func HostCodename() (string, error) {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "", fmt.Errorf("reading the host's release: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok && strings.Trim(v, `"`) != "" {
			return strings.Trim(v, `"`), nil
		}
	}
	return "", errors.New("no VERSION_CODENAME in /etc/os-release")
}

// HostMirror is the mirror the host's apt takes suite from, from
// /etc/apt/sources.list and /etc/apt/sources.list.d.
func HostMirror(suite string) (string, error) {
	var lists, deb822 []string
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		lists = append(lists, string(b))
	}
	for _, pattern := range []string{"*.list", "*.sources"} {
		files, _ := filepath.Glob(filepath.Join("/etc/apt/sources.list.d", pattern))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if strings.HasSuffix(f, ".sources") {
				deb822 = append(deb822, string(b))
			} else {
				lists = append(lists, string(b))
			}
		}
	}
	if m := aptMirror(lists, deb822, suite); m != "" {
		return m, nil
	}
	return "", fmt.Errorf("no apt source of the host serves %s (deb lines in /etc/apt/sources.list or sources.list.d)", suite)
}

// aptMirror finds the URI of the first deb source for suite, in one-line
// sources.list files and deb822 .sources files.
func aptMirror(lists, deb822 []string, suite string) string {
	for _, l := range lists {
		for _, line := range strings.Split(l, "\n") {
			f := strings.Fields(line)
			// deb [options] URI suite components...
			if len(f) < 3 || f[0] != "deb" {
				continue
			}
			f = f[1:]
			if strings.HasPrefix(f[0], "[") {
				for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
					f = f[1:]
				}
				if len(f) > 0 {
					f = f[1:]
				}
			}
			if len(f) >= 2 && f[1] == suite {
				return f[0]
			}
		}
	}
	for _, d := range deb822 {
		for _, stanza := range strings.Split(d, "\n\n") {
			fields := map[string][]string{}
			for _, line := range strings.Split(stanza, "\n") {
				k, v, ok := strings.Cut(line, ":")
				if !ok || strings.HasPrefix(line, "#") || strings.HasPrefix(line, " ") {
					continue
				}
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.Fields(v)
			}
			if slices.Contains(fields["types"], "deb") && slices.Contains(fields["suites"], suite) &&
				!slices.Contains(fields["enabled"], "no") && len(fields["uris"]) > 0 {
				return fields["uris"][0]
			}
		}
	}
	return ""
}
