package h1

import (
	"errors"
	"strconv"
)

// Response is an answer: one read from a backend whole (ReadResponse), or
// one the proxy makes itself (Text). It is reused from one answer to the
// next.
type Response struct {
	Minor  int
	Code   int
	Reason []byte
	Fields []Field
	// ContentLength is the declared length, -1 without one.
	ContentLength int64
	// Chunked: the body came chunked.
	Chunked bool
	// Close: the backend's connection cannot carry another exchange
	// (Connection: close, HTTP/1.0 without keep-alive, a body that ends
	// with the connection, or a framing a later exchange cannot trust).
	Close bool
	Body  []byte

	head []byte
}

// ErrUpgrade is a backend switching protocols (101), which a buffered data
// plane does not carry.
var ErrUpgrade = errors.New("h1: the backend switched protocols; upgrades are not proxied")

// maxInterim bounds the 1xx answers skipped before the final one.
const maxInterim = 16

// ReadResponseHead reads the head of the final answer to a request into
// r: interim answers (100 Continue, 103 Early Hints) are skipped, as the
// client gets the final one only; a 101 is ErrUpgrade. EOF before a byte
// of answer is io.EOF. The body is read with ReadResponseBody.
func (b *Reader) ReadResponseHead(r *Response) error {
	for range maxInterim {
		h, err := b.head()
		if err != nil {
			return err
		}
		r.head = append(r.head[:0], h...)
		if err := parseResponseHead(r); err != nil {
			return err
		}
		switch {
		case r.Code == 101:
			return ErrUpgrade
		case r.Code >= 200:
			return nil
		}
	}
	return errors.New("h1: too many interim answers")
}

// parseResponseHead parses r.head: HTTP/1.x, a three-digit status, an
// optional reason phrase, then the fields.
func parseResponseHead(r *Response) error {
	*r = Response{head: r.head, Fields: r.Fields[:0], Body: r.Body[:0], ContentLength: -1}
	line, p, err := nextLine(r.head)
	if err != nil {
		return err
	}
	if len(line) < 12 || line[8] != ' ' {
		return errors.New("h1: malformed status line")
	}
	minor, ok := parseVersion(line[:8])
	if !ok {
		return errors.New("h1: unsupported protocol version in the status line")
	}
	r.Minor = minor
	code := line[9:12]
	for _, c := range code {
		if c < '0' || c > '9' {
			return errors.New("h1: malformed status code")
		}
	}
	r.Code = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	if r.Code < 100 {
		return errors.New("h1: malformed status code")
	}
	switch rest := line[12:]; {
	case len(rest) == 0:
	case rest[0] != ' ':
		return errors.New("h1: malformed status line")
	default:
		r.Reason = rest[1:]
		for _, c := range r.Reason {
			if !isValueByte(c) {
				return errors.New("h1: invalid byte in the reason phrase")
			}
		}
	}
	if r.Fields, err = parseFields(p, r.Fields); err != nil {
		return err
	}
	var te bool
	for i := range r.Fields {
		f := &r.Fields[i]
		switch f.Kind {
		case KindContentLength:
			n, err := contentLength(f.Value, r.ContentLength)
			if err != nil {
				return err
			}
			r.ContentLength = n
		case KindTransferEncoding:
			te = true
			// Only chunked is taken: the body goes on with a
			// Content-Length, so another coding (gzip) would reach the
			// client undeclared.
			var other bool
			eachToken(f.Value, func(tok []byte) {
				if !equalFold(tok, "chunked") || r.Chunked {
					other = true
				}
				r.Chunked = true
			})
			if other || !r.Chunked {
				return errors.New("h1: a transfer coding other than chunked")
			}
		}
	}
	closeOpt, keepAlive, err := markConnectionTokens(r.Fields)
	if err != nil {
		return err
	}
	r.Close = closeOpt || (r.Minor == 0 && !keepAlive)
	if te {
		// Transfer-Encoding wins over Content-Length; a connection that
		// carried both is not trusted with another exchange.
		if r.ContentLength >= 0 {
			r.Close = true
		}
		r.ContentLength = -1
	}
	return nil
}

// bodiless reports an answer that has no body whatever its fields say.
func bodiless(code int, head bool) bool {
	return head || code < 200 || code == 204 || code == 304
}

// ReadResponseBody reads the body r's head framed (RFC 9112 §6.3) for the
// answer to a request (a HEAD one when head), at most max bytes:
// ErrBodyTooLarge past that.
func (b *Reader) ReadResponseBody(r *Response, head bool, max int) error {
	var err error
	r.Body = r.Body[:0]
	switch {
	case bodiless(r.Code, head):
	case r.Chunked:
		r.Body, err = b.readChunked(r.Body, max)
	case r.ContentLength >= 0:
		r.Body, err = b.readLength(r.Body, r.ContentLength, max, true)
	default: // the body ends with the connection
		r.Close = true
		r.Body, err = b.readToEOF(r.Body, max)
	}
	return err
}

// BodyBuffered reports whether r's body (as the answer to a request, a
// HEAD one when head) is buffered whole already, so reading it waits for
// nothing.
func (b *Reader) BodyBuffered(r *Response, head bool) bool {
	return bodiless(r.Code, head) || (!r.Chunked && r.ContentLength >= 0 && int64(b.Buffered()) >= r.ContentLength)
}

// Text makes r the proxy's own plain-text answer.
func (r *Response) Text(code int, body string) {
	*r = Response{head: r.head[:0], Fields: r.Fields[:0], Body: append(r.Body[:0], body...), ContentLength: int64(len(body)), Minor: 1, Code: code}
	r.Fields = append(r.Fields,
		Field{Name: nameContentType, Value: valueTextPlain},
		Field{Name: nameNosniff, Value: valueNosniff})
}

var (
	nameContentType = []byte("Content-Type")
	valueTextPlain  = []byte("text/plain; charset=utf-8")
	nameNosniff     = []byte("X-Content-Type-Options")
	valueNosniff    = []byte("nosniff")
)

// Field returns the value of the first field of kind k, nil without one.
func (r *Response) Field(k Kind) []byte {
	for i := range r.Fields {
		if r.Fields[i].Kind == k {
			return r.Fields[i].Value
		}
	}
	return nil
}

// AppendResponseHead appends r's head as the answer to a client:
// HTTP/1.1, the fields without the hop-by-hop ones, framed by a
// Content-Length (the body is whole), and Connection: close when the
// server closes the connection after it (or keep-alive for an HTTP/1.0
// client it keeps). The answer to a HEAD request, a 304 and a 204 carry no
// body; the first two keep the Content-Length the backend declared. The
// body, if it has one (HasBody), follows.
func AppendResponseHead(dst []byte, r *Response, head, closing, keepAlive10 bool) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(r.Code), 10)
	dst = append(dst, ' ')
	if len(r.Reason) > 0 {
		dst = append(dst, r.Reason...)
	} else {
		dst = append(dst, StatusText(r.Code)...)
	}
	dst = append(dst, "\r\n"...)
	for i := range r.Fields {
		f := &r.Fields[i]
		if f.Hop || f.Kind == KindContentLength || f.Kind == KindTransferEncoding {
			continue
		}
		dst = AppendField(dst, f.Name, f.Value)
	}
	switch {
	case r.Code < 200 || r.Code == 204:
	case bodiless(r.Code, head):
		if r.ContentLength >= 0 {
			dst = append(dst, "Content-Length: "...)
			dst = strconv.AppendInt(dst, r.ContentLength, 10)
			dst = append(dst, "\r\n"...)
		}
	default:
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(r.Body)), 10)
		dst = append(dst, "\r\n"...)
	}
	switch {
	case closing:
		dst = append(dst, "Connection: close\r\n"...)
	case keepAlive10:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// HasBody reports whether r, as the answer to a request (a HEAD one when
// head), is sent with its body.
func (r *Response) HasBody(head bool) bool { return !bodiless(r.Code, head) }

// AppendField appends one field line.
func AppendField(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// StatusText is the reason phrase of the codes the proxy answers with
// itself, and of common ones a backend may leave without a phrase.
func StatusText(code int) string {
	switch code {
	case 100:
		return "Continue"
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	case 204:
		return "No Content"
	case 206:
		return "Partial Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 303:
		return "See Other"
	case 304:
		return "Not Modified"
	case 307:
		return "Temporary Redirect"
	case 308:
		return "Permanent Redirect"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 409:
		return "Conflict"
	case 413:
		return "Content Too Large"
	case 415:
		return "Unsupported Media Type"
	case 429:
		return "Too Many Requests"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	}
	return ""
}

// trimHead drops a head copy grown over max bytes by an earlier answer
// when the last one fitted in max, and with it everything that points into
// it (call it only once the answer is written).
func (r *Response) trimHead(max int) {
	if cap(r.head) > max && len(r.head) <= max {
		clear(r.Fields[:cap(r.Fields)])
		*r = Response{Fields: r.Fields[:0], Body: r.Body[:0]}
	}
}
