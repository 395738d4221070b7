package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// headSize is how much of an oversized message is kept, so that its id and
// method can still be found and the sender told why it was refused.
const headSize = 64 << 10

// A frameReader splits a stdio stream into newline-delimited messages, as the
// MCP stdio transport frames them. Unlike a JSON decoder it survives garbage:
// a malformed line is returned as it is for the caller to reject, and a line
// longer than max is consumed to its end and reported as a *tooLargeError,
// after which reading goes on with the next line.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte // reused between calls; a frame is valid until the next call
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// tooLargeError reports a message over the size limit. Head holds its first
// bytes, enough to find the id of a well-formed request.
type tooLargeError struct {
	Size  int64
	Limit int
	Head  []byte
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the %d-byte limit", e.Size, e.Limit)
}

// next returns the next non-blank line without its line terminator. The
// returned slice is only valid until the next call. At the end of the stream
// it returns io.EOF (a final line without a newline is still returned first).
func (f *frameReader) next() ([]byte, error) {
	for {
		line, err := f.readLine()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return line, nil
	}
}

func (f *frameReader) readLine() ([]byte, error) {
	if cap(f.buf) > 1<<20 {
		f.buf = nil // do not hold on to a huge message's memory
	}
	f.buf = f.buf[:0]
	var size int64
	tooLarge := false
	for {
		chunk, err := f.r.ReadSlice('\n')
		size += int64(len(chunk))
		if !tooLarge {
			// The limit counts the message, not its newline.
			if len(f.buf)+len(chunk) > f.max+1 || (err != nil && len(f.buf)+len(chunk) > f.max) {
				tooLarge = true
				keep := min(headSize, len(f.buf))
				head := append([]byte(nil), f.buf[:keep]...)
				if rest := headSize - keep; rest > 0 {
					head = append(head, chunk[:min(rest, len(chunk))]...)
				}
				f.buf = head
			} else {
				f.buf = append(f.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLarge {
				return nil, &tooLargeError{Size: size - 1, Limit: f.max, Head: f.buf}
			}
			return f.buf[:len(f.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if tooLarge {
				return nil, &tooLargeError{Size: size, Limit: f.max, Head: f.buf}
			}
			if len(f.buf) > 0 {
				return f.buf, nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}
