package logs

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 3, 15, 0, 123456789, time.UTC)

func TestAppendRecord(t *testing.T) {
	tests := []struct {
		name    string
		t       time.Time
		stream  string
		partial bool
		content string
		want    string
	}{
		{"full", t0, Stdout, false, "hello", "2026-11-21T03:15:00.123456789Z stdout F hello\n"},
		{"partial", t0, Stderr, true, "abc", "2026-11-21T03:15:00.123456789Z stderr P abc\n"},
		{"empty", t0, Stdout, false, "", "2026-11-21T03:15:00.123456789Z stdout F \n"},
		{"utc", t0.In(time.FixedZone("X", 3600)), Stdout, false, "x", "2026-11-21T03:15:00.123456789Z stdout F x\n"},
		{"trailing zeros trimmed", time.Date(2026, 1, 2, 3, 4, 5, 500000000, time.UTC), Stdout, false, "x", "2026-01-02T03:04:05.5Z stdout F x\n"},
		{"carriage return kept", t0, Stdout, false, "dos\r", "2026-11-21T03:15:00.123456789Z stdout F dos\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendRecord(nil, tt.t, tt.stream, tt.partial, []byte(tt.content)))
			if got != tt.want {
				t.Errorf("AppendRecord() = %q, want %q", got, tt.want)
			}
			r, err := ParseRecord([]byte(strings.TrimSuffix(got, "\n")))
			if err != nil || !r.Time.Equal(tt.t) || r.Stream != tt.stream || r.Partial != tt.partial || string(r.Content) != tt.content {
				t.Errorf("ParseRecord(%q) = %+v, %v; want the record back", got, r, err)
			}
		})
	}
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		line    string
		want    string // content; "" with wantErr
		partial bool
		wantErr bool
	}{
		{line: "2026-11-21T03:15:00Z stdout F a b  c", want: "a b  c"},
		{line: "2026-11-21T03:15:00Z stderr P part", want: "part", partial: true},
		{line: "2026-11-21T03:15:00+01:00 stdout F x", want: "x"},
		{line: "2026-11-21T03:15:00Z stdout F", want: ""},
		{line: "2026-11-21T03:15:00Z stdout F:extra x", want: "x"},
		{line: "", wantErr: true},
		{line: "garbage", wantErr: true},
		{line: "yesterday stdout F x", wantErr: true},
		{line: "2026-11-21T03:15:00Z stdin F x", wantErr: true},
		{line: "2026-11-21T03:15:00Z stdout X x", wantErr: true},
		{line: "2026-11-21T03:15:00Z stdout", wantErr: true},
	}
	for _, tt := range tests {
		r, err := ParseRecord([]byte(tt.line))
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseRecord(%q) error = %v, want error %v", tt.line, err, tt.wantErr)
			continue
		}
		if err == nil && (string(r.Content) != tt.want || r.Partial != tt.partial) {
			t.Errorf("ParseRecord(%q) = content %q partial %v, want %q %v", tt.line, r.Content, r.Partial, tt.want, tt.partial)
		}
	}
}
