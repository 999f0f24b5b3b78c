package main

import "testing"

func TestDebVersion(t *testing.T) {
	tests := []struct {
		name, describe, want string
	}{
		{"release", "v1.2.3", "1.2.3"},
		{"after a release", "v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"dirty after a release", "v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234.dirty"},
		{"no tag", "abc1234", "0~gitabc1234"},
		{"no tag, dirty", "abc1234-dirty", "0~gitabc1234+dirty"},
		{"no git", "dev", "0~gitdev"},
		{"empty", "", "0~gitdev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := debVersion(tt.describe); got != tt.want {
				t.Errorf("debVersion(%q) = %q, want %q", tt.describe, got, tt.want)
			}
		})
	}
}
