package prober

import (
	"bytes"
	"errors"
)

// Limits on one probe answer: a real one is ~200 B with its headers.
const (
	maxHeader = 8 << 10
	maxBody   = 4 << 10
	// maxRaw bounds what is buffered: headers plus a chunked body's framing.
	maxRaw = maxHeader + 2*maxBody
)

// Framing errors. errIncomplete asks for more bytes; the others end the
// exchange and the connection.
var (
	errIncomplete   = errors.New("prober: incomplete answer")
	errProtocol     = errors.New("prober: not an HTTP/1.x answer")
	errBodyTooBig   = errors.New("prober: answer body over 4 KiB")
	errHeaderTooBig = errors.New("prober: answer headers over 8 KiB")
)

// response is a parsed HTTP/1.x answer held in a buffer.
type response struct {
	status    int
	keepAlive bool
	chunked   bool
	header    int // length of the status line and headers
	body      []byte
	end       int // length of the whole answer in the buffer
}

// parseResponse parses the answer at the start of b, where eof says the
// peer closed after b. It returns errIncomplete while more bytes are needed,
// and leaves r.status set once the status line is read. A chunked body is
// decoded in place, so b is changed once the answer is complete.
func parseResponse(b []byte, eof bool) (r response, err error) {
	line, rest, ok := cutLine(b)
	if !ok {
		return r, headerIncomplete(len(b), eof)
	}
	// HTTP/1.x SSS[ reason]
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return r, errProtocol
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return r, errProtocol
		}
		r.status = r.status*10 + int(c-'0')
	}
	http10 := line[7] == '0'
	r.keepAlive = !http10
	contentLength := -1
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return r, headerIncomplete(len(b), eof)
		}
		if len(b)-len(rest) > maxHeader {
			return r, errHeaderTooBig
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return r, errProtocol
		}
		name, value := line[:colon], trimSpace(line[colon+1:])
		switch {
		case equalFold(name, "content-length"):
			n, ok := parseDecimal(value)
			if !ok || (contentLength >= 0 && n != contentLength) {
				return r, errProtocol
			}
			contentLength = n
		case equalFold(name, "transfer-encoding"):
			if !equalFold(value, "chunked") {
				return r, errProtocol // no other coding is ever asked for
			}
			r.chunked = true
		case equalFold(name, "connection"):
			for len(value) > 0 {
				var tok []byte
				if i := bytes.IndexByte(value, ','); i >= 0 {
					tok, value = trimSpace(value[:i]), value[i+1:]
				} else {
					tok, value = trimSpace(value), nil
				}
				if equalFold(tok, "close") {
					r.keepAlive = false
				} else if equalFold(tok, "keep-alive") && http10 {
					r.keepAlive = true
				}
			}
		}
	}
	r.header = len(b) - len(rest)
	switch {
	case r.chunked && contentLength >= 0:
		return r, errProtocol
	case r.status < 200 || r.status == 204 || r.status == 304:
		// No body. A 1xx is followed by another answer: not worth following
		// for a probe, so the connection is not reused.
		if r.status < 200 {
			r.keepAlive = false
		}
		r.end = r.header
	case r.chunked:
		raw, n, err := walkChunks(rest, false)
		if err == errIncomplete {
			return r, incomplete(eof)
		}
		if err != nil {
			return r, err
		}
		walkChunks(rest, true)
		r.body, r.end = rest[:n], r.header+raw
	case contentLength >= 0:
		if contentLength > maxBody {
			return r, errBodyTooBig
		}
		if len(rest) < contentLength {
			return r, incomplete(eof)
		}
		r.body, r.end = rest[:contentLength], r.header+contentLength
	default:
		// Delimited by the peer closing.
		r.keepAlive = false
		if len(rest) > maxBody {
			return r, errBodyTooBig
		}
		if !eof {
			return r, errIncomplete
		}
		r.body, r.end = rest, len(b)
	}
	return r, nil
}

// incomplete is the error for an answer that is not complete yet: more is
// needed, unless the peer has closed and cut it short.
func incomplete(eof bool) error {
	if eof {
		return errProtocol
	}
	return errIncomplete
}

func headerIncomplete(n int, eof bool) error {
	if n > maxHeader {
		return errHeaderTooBig
	}
	return incomplete(eof)
}

// walkChunks reads a chunked body at the start of b and returns the raw
// length up to the end of its trailers and the decoded length. With compact
// it moves the chunks' data to the start of b; call it so only on a body
// walkChunks has accepted.
func walkChunks(b []byte, compact bool) (raw, n int, err error) {
	i := 0
	for {
		line, rest, ok := cutLine(b[i:])
		if !ok {
			return 0, 0, errIncomplete
		}
		if semi := bytes.IndexByte(line, ';'); semi >= 0 {
			line = line[:semi] // chunk extensions are ignored
		}
		line = trimSpace(line)
		if len(line) == 0 || len(line) > 8 {
			return 0, 0, errProtocol
		}
		size := 0
		for _, c := range line {
			switch {
			case c >= '0' && c <= '9':
				size = size<<4 | int(c-'0')
			case c >= 'a' && c <= 'f':
				size = size<<4 | int(c-'a'+10)
			case c >= 'A' && c <= 'F':
				size = size<<4 | int(c-'A'+10)
			default:
				return 0, 0, errProtocol
			}
		}
		i = len(b) - len(rest)
		if size == 0 {
			// Trailers, up to an empty line.
			for {
				line, rest, ok := cutLine(b[i:])
				if !ok {
					return 0, 0, errIncomplete
				}
				i = len(b) - len(rest)
				if len(line) == 0 {
					return i, n, nil
				}
			}
		}
		if n+size > maxBody {
			return 0, 0, errBodyTooBig
		}
		if len(b)-i < size {
			return 0, 0, errIncomplete
		}
		if compact {
			copy(b[n:], b[i:i+size])
		}
		n += size
		i += size
		// The chunk's CRLF.
		switch {
		case len(b)-i >= 2 && b[i] == '\r' && b[i+1] == '\n':
			i += 2
		case len(b)-i >= 1 && b[i] == '\n':
			i++
		case len(b)-i < 2 && (len(b) == i || b[i] == '\r'):
			return 0, 0, errIncomplete
		default:
			return 0, 0, errProtocol
		}
	}
}

// cutLine splits b after its first line; the line lacks its CRLF (or LF).
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, b, false
	}
	line = b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, b[i+1:], true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold compares b with a lower-case ASCII word, ignoring case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// parseDecimal reads a non-negative decimal of at most 9 digits.
func parseDecimal(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
