package h1

import (
	"errors"
	"io"
)

// Reader is a buffered reader over a connection whose buffer bounds a
// message head: a head that does not fit is refused. The buffer starts
// small and grows to its bound only for a head that needs it. Bodies are
// read through it into memory the caller owns. It is not safe for
// concurrent use.
type Reader struct {
	rd   io.Reader
	buf  []byte
	max  int // the largest the buffer grows to
	r, w int
	// scanned is how far past r the search for the end of a head has
	// looked, so a head that arrives in pieces is scanned once.
	scanned int
	// n counts the bytes taken from rd since the last Mark.
	n int64
	// lastHead is the length of the last head read.
	lastHead int
	// charge pays for body buffers (nil: nothing is charged).
	charge *Charge
}

// ChargeTo makes body buffers grown from now on be charged to c (nil: to
// nothing).
func (b *Reader) ChargeTo(c *Charge) { b.charge = c }

// NewReader returns a reader over rd that takes heads of up to max bytes.
func NewReader(rd io.Reader, max int) *Reader {
	return &Reader{rd: rd, buf: make([]byte, min(max, initialBuffer)), max: max}
}

// initialBuffer is the buffer a Reader starts with: most heads fit.
const initialBuffer = 4 << 10

// Shrink returns a buffer grown for a large head to its initial size, when
// nothing is buffered (between messages) and the last head fitted in that:
// a client whose heads are all large (big cookies) keeps the larger buffer
// rather than growing it again for every request.
func (b *Reader) Shrink() {
	if len(b.buf) > initialBuffer && b.r == b.w && b.lastHead <= initialBuffer {
		b.buf, b.r, b.w, b.scanned = make([]byte, initialBuffer), 0, 0, 0
	}
}

// Buffered is the number of bytes read from the connection and not yet
// consumed.
func (b *Reader) Buffered() int { return b.w - b.r }

// Mark starts counting received bytes afresh; Received tells how many came
// since.
func (b *Reader) Mark()           { b.n = int64(b.w - b.r) }
func (b *Reader) Received() int64 { return b.n }

// Fill reads once from the connection when nothing is buffered: it waits
// for the first byte of the next message (under whatever deadline the
// caller set) without consuming it.
func (b *Reader) Fill() error {
	if b.r < b.w {
		return nil
	}
	return b.fill()
}

// fill moves the unread bytes to the front and reads once more.
func (b *Reader) fill() error {
	if b.r > 0 {
		n := copy(b.buf, b.buf[b.r:b.w])
		b.w, b.r = n, 0
	}
	if b.w == len(b.buf) {
		if len(b.buf) >= b.max {
			return ErrHeadTooLarge
		}
		grown := make([]byte, min(2*len(b.buf), b.max))
		copy(grown, b.buf[:b.w])
		b.buf = grown
	}
	for range 100 {
		n, err := b.rd.Read(b.buf[b.w:])
		if n < 0 || n > len(b.buf)-b.w {
			return errors.New("h1: invalid read count")
		}
		b.w += n
		b.n += int64(n)
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// ErrHeadTooLarge is a head longer than the reader's buffer.
var ErrHeadTooLarge = errors.New("h1: message head too large")

// head returns the next message head, up to and including the empty line
// that ends it (CRLF CRLF, or bare LFs), and consumes it. The slice is the
// reader's and valid until the next read. EOF before a byte of head is
// io.EOF; EOF within one, io.ErrUnexpectedEOF.
func (b *Reader) head() ([]byte, error) {
	for {
		if end := b.headEnd(); end > 0 {
			h := b.buf[b.r : b.r+end]
			b.r += end
			b.scanned = 0
			b.lastHead = end
			return h, nil
		}
		if err := b.fill(); err != nil {
			if err == io.EOF && b.r < b.w {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// headEnd is the length of the head at b.r when its end is buffered, else
// 0. Leading empty lines (which a server should ignore before a request
// line) do not end it.
func (b *Reader) headEnd() int {
	p := b.buf[b.r:b.w]
	start := 0
	for start < len(p) && (p[start] == '\n' || (p[start] == '\r' && start+1 < len(p) && p[start+1] == '\n')) {
		if p[start] == '\r' {
			start++
		}
		start++
	}
	i := max(b.scanned, start)
	for ; i < len(p); i++ {
		if p[i] != '\n' {
			continue
		}
		// An empty line: LF right after the LF of the previous line, or
		// CR LF after it.
		if i >= 1 && p[i-1] == '\n' && i-1 >= start {
			return i + 1
		}
		if i >= 2 && p[i-1] == '\r' && p[i-2] == '\n' && i-2 >= start {
			return i + 1
		}
	}
	// Keep the last two bytes unscanned: an LF there may start the end.
	b.scanned = max(start, len(p)-2)
	return 0
}

// line returns the next line without its LF (a CR before it is the
// caller's to judge), and consumes it. Lines are bounded by the buffer.
func (b *Reader) line() ([]byte, error) {
	for {
		for i, c := range b.buf[b.r:b.w] {
			if c == '\n' {
				l := b.buf[b.r : b.r+i]
				b.r += i + 1
				return l, nil
			}
		}
		if err := b.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// readToEOF appends to dst what the connection sends until it closes, at
// most max bytes in all: ErrBodyTooLarge past that.
func (b *Reader) readToEOF(dst []byte, max int) ([]byte, error) {
	if b.w-b.r > max-len(dst) {
		return append(dst, b.buf[b.r:b.r+max-len(dst)+1]...), ErrBodyTooLarge
	}
	dst, err := b.growBody(dst, b.w-b.r, max+1, 0)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b.buf[b.r:b.w]...)
	b.r = b.w
	for {
		if dst, err = b.growBody(dst, 1, max+1, initialBuffer); err != nil {
			return dst, err
		}
		m, err := b.rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+m]
		b.n += int64(m)
		if len(dst) > max {
			return dst, ErrBodyTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// ErrBodyTooLarge is a body over the size limit.
var ErrBodyTooLarge = errors.New("h1: body too large")
