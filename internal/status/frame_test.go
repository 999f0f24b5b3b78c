package status

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		typ     byte
		payload []byte
	}{
		{"stdin", frameStdin, []byte("echo hi\n")},
		{"stdout", frameStdout, []byte("hi\n")},
		{"stderr empty", frameStderr, nil},
		{"stdin-close", frameStdinClose, nil},
		{"resize", frameResize, resizePayload(TermSize{Cols: 120, Rows: 40})},
		{"exit", frameExit, exitPayload(3, "")},
		{"longest", frameStdout, bytes.Repeat([]byte{'x'}, maxFramePayload)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := newFrameWriter(&b).send(tt.typ, tt.payload); err != nil {
				t.Fatalf("send(%d, %d bytes) = %v", tt.typ, len(tt.payload), err)
			}
			if got, want := b.Len(), frameHeaderLen+len(tt.payload); got != want {
				t.Errorf("send(%d, %d bytes) wrote %d bytes, want %d", tt.typ, len(tt.payload), got, want)
			}
			f, err := readFrame(&b, make([]byte, maxFramePayload))
			if err != nil {
				t.Fatalf("readFrame() = %v", err)
			}
			if f.typ != tt.typ || !bytes.Equal(f.payload, tt.payload) {
				t.Errorf("readFrame() = type %d, %.40q; want type %d, %.40q", f.typ, f.payload, tt.typ, tt.payload)
			}
			if _, err := readFrame(&b, make([]byte, maxFramePayload)); !errors.Is(err, io.EOF) {
				t.Errorf("readFrame() after the last frame = %v, want io.EOF", err)
			}
		})
	}
}

func TestFrameWire(t *testing.T) {
	// The bytes on the wire are the protocol: they must not change.
	var b bytes.Buffer
	fw := newFrameWriter(&b)
	fw.send(frameResize, resizePayload(TermSize{Cols: 0x0102, Rows: 0x0304}))
	fw.send(frameExit, exitPayload(-1, "no"))
	want := []byte{4, 0, 0, 0, 4, 1, 2, 3, 4, 5, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 'n', 'o'}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("frames = % x, want % x", b.Bytes(), want)
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty", nil, io.EOF},
		{"header cut", []byte{1, 0, 0}, io.ErrUnexpectedEOF},
		{"payload cut", []byte{1, 0, 0, 0, 3, 'a'}, io.ErrUnexpectedEOF},
		{"payload missing", []byte{1, 0, 0, 0, 3}, io.ErrUnexpectedEOF},
		{"too long", []byte{1, 0, 0, 0x80, 1}, errFrameTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readFrame(bytes.NewReader(tt.input), make([]byte, maxFramePayload))
			if !errors.Is(err, tt.want) {
				t.Errorf("readFrame(% x) = %v, want %v", tt.input, err, tt.want)
			}
		})
	}
	if err := newFrameWriter(io.Discard).send(frameStdout, make([]byte, maxFramePayload+1)); !errors.Is(err, errFrameTooLong) {
		t.Errorf("send of %d bytes = %v, want %v", maxFramePayload+1, err, errFrameTooLong)
	}
}

func TestPayloads(t *testing.T) {
	for _, size := range []TermSize{{}, {80, 24}, {65535, 65535}} {
		got, err := parseResize(resizePayload(size))
		if err != nil || got != size {
			t.Errorf("parseResize(resizePayload(%v)) = %v, %v; want %v", size, got, err, size)
		}
	}
	if _, err := parseResize([]byte{1, 2, 3}); err == nil {
		t.Error("parseResize of 3 bytes = nil error, want one")
	}
	for _, tt := range []struct {
		code int
		msg  string
	}{{0, ""}, {3, ""}, {255, ""}, {-1, "container c is gone"}} {
		code, msg, err := parseExit(exitPayload(tt.code, tt.msg))
		if err != nil || code != tt.code || msg != tt.msg {
			t.Errorf("parseExit(exitPayload(%d, %q)) = %d, %q, %v", tt.code, tt.msg, code, msg, err)
		}
	}
	if _, _, err := parseExit([]byte{0}); err == nil {
		t.Error("parseExit of 1 byte = nil error, want one")
	}
	long := strings.Repeat("m", 2*maxFramePayload)
	if p := exitPayload(1, long); len(p) != maxFramePayload {
		t.Errorf("exitPayload with a long message is %d bytes, want it cut at %d", len(p), maxFramePayload)
	}
}

func TestStreamWriter(t *testing.T) {
	// Frames written at once by several streams come out whole, and a
	// long write is cut into frames that keep its bytes in order.
	var b bytes.Buffer
	fw := newFrameWriter(&b)
	long := bytes.Repeat([]byte("0123456789"), maxFramePayload/4)
	var wg sync.WaitGroup
	for _, typ := range []byte{frameStdout, frameStderr} {
		wg.Go(func() {
			for range 10 {
				if n, err := fw.stream(typ).Write(long); n != len(long) || err != nil {
					t.Errorf("Write(%d bytes) = %d, %v", len(long), n, err)
				}
			}
		})
	}
	wg.Wait()
	got := map[byte][]byte{}
	buf := make([]byte, maxFramePayload)
	for {
		f, err := readFrame(&b, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("readFrame() = %v", err)
		}
		got[f.typ] = append(got[f.typ], f.payload...)
	}
	want := bytes.Repeat(long, 10)
	for _, typ := range []byte{frameStdout, frameStderr} {
		if !bytes.Equal(got[typ], want) {
			t.Errorf("frames of type %d carry %d bytes, want the %d written in order", typ, len(got[typ]), len(want))
		}
	}
}
