package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestJournalHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newJournalHandler(&buf, slog.LevelInfo)).With("pod", "web")
	log.Debug("hidden")
	log.Info("started", "container", "main")
	log.Warn("backing off")
	log.Error("failed")
	log.Log(t.Context(), slog.LevelWarn+2, "between warn and error")
	want := []string{
		"<6>level=INFO msg=started pod=web container=main",
		"<4>level=WARN msg=\"backing off\" pod=web",
		"<3>level=ERROR msg=failed pod=web",
		"<4>level=WARN+2 msg=\"between warn and error\" pod=web",
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("journal lines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnderJournal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  string
		want bool
	}{
		{fmt.Sprintf("%d:%d", st.Dev, st.Ino), true},
		{fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), false},
		{"", false},
	} {
		t.Setenv("JOURNAL_STREAM", tt.env)
		if got := underJournal(f); got != tt.want {
			t.Errorf("underJournal with JOURNAL_STREAM=%q = %v, want %v", tt.env, got, tt.want)
		}
	}
}
