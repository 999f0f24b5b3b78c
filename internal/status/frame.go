package status

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The frame types of the exec protocol, which the package doc describes.
const (
	frameStdin      byte = 0
	frameStdout     byte = 1
	frameStderr     byte = 2
	frameStdinClose byte = 3
	frameResize     byte = 4
	frameExit       byte = 5
)

// ExecProtocol is the name of the exec protocol in the Upgrade header.
const ExecProtocol = "staticlet-exec.v1"

const (
	frameHeaderLen = 5
	// maxFramePayload bounds the payload of one frame; writers send
	// longer data in several frames.
	maxFramePayload = 32 << 10
)

// errFrameTooLong is the error of a frame longer than maxFramePayload.
var errFrameTooLong = errors.New("exec protocol: frame too long")

// frame is one frame of the exec protocol.
type frame struct {
	typ     byte
	payload []byte
}

// readFrame reads one frame from r into buf (which must hold
// maxFramePayload bytes); the payload returned aliases buf. A connection
// that ends between frames gives io.EOF; one that ends within a frame
// gives io.ErrUnexpectedEOF.
func readFrame(r io.Reader, buf []byte) (frame, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFramePayload {
		return frame{}, fmt.Errorf("%w: %d bytes of type %d", errFrameTooLong, n, hdr[0])
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return frame{typ: hdr[0], payload: buf[:n]}, nil
}

// frameWriter writes whole frames to a connection. It is safe for
// concurrent use: frames from several writers do not interleave.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer // guarded by mu
	buf []byte    // guarded by mu
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: w}
}

// send writes one frame of type typ; payload must not be longer than
// maxFramePayload.
func (fw *frameWriter) send(typ byte, payload []byte) error {
	if len(payload) > maxFramePayload {
		return fmt.Errorf("%w: %d bytes of type %d", errFrameTooLong, len(payload), typ)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	// One write per frame, so that a frame is never split by another.
	fw.buf = append(fw.buf[:0], typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(fw.buf[1:], uint32(len(payload)))
	fw.buf = append(fw.buf, payload...)
	_, err := fw.w.Write(fw.buf)
	return err
}

// stream returns a writer that sends what is written to it as frames of
// type typ, cut at maxFramePayload.
func (fw *frameWriter) stream(typ byte) io.Writer {
	return streamWriter{fw: fw, typ: typ}
}

type streamWriter struct {
	fw  *frameWriter
	typ byte
}

func (s streamWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), maxFramePayload)]
		if err := s.fw.send(s.typ, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		b = b[len(chunk):]
	}
	return n, nil
}

// resizePayload encodes a terminal size for a resize frame.
func resizePayload(size TermSize) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b, size.Cols)
	binary.BigEndian.PutUint16(b[2:], size.Rows)
	return b
}

// parseResize decodes the payload of a resize frame.
func parseResize(payload []byte) (TermSize, error) {
	if len(payload) != 4 {
		return TermSize{}, fmt.Errorf("exec protocol: resize frame of %d bytes, want 4", len(payload))
	}
	return TermSize{Cols: binary.BigEndian.Uint16(payload), Rows: binary.BigEndian.Uint16(payload[2:])}, nil
}

// exitPayload encodes an exit code and an error message for an exit frame,
// the message cut to fit.
func exitPayload(code int, msg string) []byte {
	b := make([]byte, 4, 4+len(msg))
	binary.BigEndian.PutUint32(b, uint32(int32(code)))
	b = append(b, msg...)
	return b[:min(len(b), maxFramePayload)]
}

// parseExit decodes the payload of an exit frame.
func parseExit(payload []byte) (code int, msg string, err error) {
	if len(payload) < 4 {
		return 0, "", fmt.Errorf("exec protocol: exit frame of %d bytes, want at least 4", len(payload))
	}
	return int(int32(binary.BigEndian.Uint32(payload))), string(payload[4:]), nil
}
