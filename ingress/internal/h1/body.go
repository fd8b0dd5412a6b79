package h1

import "io"

// ReadRequestBody reads the body r's head framed into r.Body, at most max
// bytes: ErrBodyTooLarge past that (for a Content-Length over max before
// a byte of body is read).
func (b *Reader) ReadRequestBody(r *Request, max int) error {
	r.Body = r.Body[:0]
	var err error
	switch {
	case r.Chunked:
		r.Body, err = b.readChunked(r.Body, max)
	case r.ContentLength > 0:
		r.Body, err = b.readLength(r.Body, r.ContentLength, max, true)
	}
	return err
}

// readLength appends n bytes of body to dst, which may hold limit in all.
// Memory is taken as the bytes arrive, not for all n at once: a head
// declaring 32 MiB and sending nothing holds no 32 MiB buffer. dst grows
// by doubling, up to the end of these n bytes when they are the whole body
// (last), up to limit when more chunks may follow: a body of many small
// chunks, however they arrive, is copied a bounded number of times.
func (b *Reader) readLength(dst []byte, n int64, limit int, last bool) ([]byte, error) {
	if n > int64(limit-len(dst)) {
		return dst, ErrBodyTooLarge
	}
	end := len(dst) + int(n)
	bound := limit
	if last {
		bound = end
	}
	m := min(b.w-b.r, int(n))
	dst, err := b.growBody(dst, m, bound, 0)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b.buf[b.r:b.r+m]...)
	b.r += m
	for stalls := 0; len(dst) < end; {
		if dst, err = b.growBody(dst, 1, bound, minGrowth); err != nil {
			return dst, err
		}
		k, err := b.rd.Read(dst[len(dst):min(cap(dst), end)])
		dst = dst[:len(dst)+k]
		b.n += int64(k)
		if len(dst) == end {
			return dst, nil
		}
		switch {
		case err == io.EOF:
			return dst, io.ErrUnexpectedEOF
		case err != nil:
			return dst, err
		case k == 0:
			if stalls++; stalls > 100 {
				return dst, io.ErrNoProgress
			}
		default:
			stalls = 0
		}
	}
	return dst, nil
}

// minGrowth is the least a body buffer grows by before a read from the
// connection: reads of a large body are not made small.
const minGrowth = 64 << 10

// growBody makes room in dst for need more bytes when it has less: twice
// its capacity, at least floor more, never past bound (need fits under
// it), so memory follows the bytes that came, not the length declared.
// The growth is charged to the reader's Charge: ErrBodyBudget when spent.
func (b *Reader) growBody(dst []byte, need, bound, floor int) ([]byte, error) {
	if cap(dst)-len(dst) >= need {
		return dst, nil
	}
	size := min(bound, max(2*cap(dst), len(dst)+max(need, floor)))
	if !b.charge.take(size - cap(dst)) {
		return dst, ErrBodyBudget
	}
	grown := make([]byte, len(dst), size)
	copy(grown, dst)
	return grown, nil
}

// readChunked appends a chunked body (RFC 9112 §7.1), de-chunked, to dst.
// Chunk extensions are skipped; the trailer section is read and dropped
// (the body goes on with a Content-Length, so its fields have nowhere to go,
// and they may not be merged into the head, RFC 9110 §6.5.1).
func (b *Reader) readChunked(dst []byte, max int) ([]byte, error) {
	for {
		line, err := b.line()
		if err != nil {
			return dst, err
		}
		size, err := chunkSize(line)
		if err != nil {
			return dst, err
		}
		if size == 0 {
			return dst, b.skipTrailer()
		}
		if size > int64(max-len(dst)) {
			return dst, ErrBodyTooLarge
		}
		if dst, err = b.readLength(dst, size, max, false); err != nil {
			return dst, err
		}
		line, err = b.line()
		if err != nil {
			return dst, err
		}
		if len(line) > 1 || (len(line) == 1 && line[0] != '\r') {
			return dst, badRequest("chunk data longer than its size")
		}
	}
}

// chunkSize parses a chunk-size line: hex digits, then optional
// whitespace and extensions after a semicolon.
func chunkSize(line []byte) (int64, error) {
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	var n int64
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto rest
		}
		if i >= 15 {
			return 0, badRequest("chunk size too large")
		}
		n = n<<4 | int64(d)
	}
rest:
	if i == 0 {
		return 0, badRequest("malformed chunk size")
	}
	ext := trimOWS(line[i:])
	if len(ext) > 0 && ext[0] != ';' {
		return 0, badRequest("malformed chunk size")
	}
	for _, c := range ext {
		if !isValueByte(c) {
			return 0, badRequest("invalid byte in a chunk extension")
		}
	}
	return n, nil
}

// skipTrailer reads the trailer section, up to its empty line, and drops
// it. It is bounded like a head.
func (b *Reader) skipTrailer() error {
	total := 0
	for {
		line, err := b.line()
		if err != nil {
			return err
		}
		if total += len(line) + 1; total > b.max {
			return ErrHeadTooLarge
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			return nil
		}
		for _, c := range line {
			if c == '\r' || c == 0 {
				return badRequest("invalid byte in a trailer field")
			}
		}
	}
}
