package h1

import (
	"errors"
	"fmt"
)

// Request is a request read whole: its head parsed, its body in memory.
// A Request is reused from one request to the next on a connection.
type Request struct {
	Method []byte
	// Target is the request target as sent (origin form, or absolute form
	// from a client that takes the server for a forward proxy).
	Target []byte
	// Minor is the protocol's minor version: 0 for HTTP/1.0, 1 for
	// HTTP/1.1 (and later 1.x, read as 1.1).
	Minor int
	// Fields are the header fields in the order received.
	Fields []Field
	// Host is the Host field's value; nil without one.
	Host []byte
	// HasBody: the request frames a body (Content-Length, even 0, or
	// chunked); Body holds it, de-chunked.
	HasBody bool
	Body    []byte
	// ContentLength is the declared length, -1 without a Content-Length
	// field.
	ContentLength int64
	// Chunked: Transfer-Encoding: chunked.
	Chunked bool
	// Close: the client's connection ends after this request (Connection:
	// close, or HTTP/1.0 without keep-alive).
	Close bool
	// ExpectContinue: an HTTP/1.1 client waits for 100 Continue before it
	// sends the body.
	ExpectContinue bool

	head []byte // the owned copy of the head the slices above point into
}

// IsHead reports a HEAD request.
func (r *Request) IsHead() bool { return string(r.Method) == "HEAD" }

// Error is a request the server cannot take, with the status it answers.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("h1: %d: %s", e.Status, e.Reason) }

func badRequest(reason string) error { return &Error{Status: 400, Reason: reason} }

// StatusOf is the status an error of reading a request answers: the
// Error's, 413 for a body too large, 400 for a head too large, 0 for a
// failure of the connection itself (no answer is owed or possible).
func StatusOf(err error) int {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Status
	case errors.Is(err, ErrBodyTooLarge):
		return 413
	case errors.Is(err, ErrHeadTooLarge):
		return 400
	}
	return 0
}

// ReadRequestHead reads and parses the next request head. The body, if
// any, is still to be read with ReadRequestBody.
func (b *Reader) ReadRequestHead(r *Request) error {
	h, err := b.head()
	if err != nil {
		// Nothing of the previous request stands for this one (a refusal
		// is not framed as the answer to an earlier HEAD).
		*r = Request{head: r.head[:0], Fields: r.Fields[:0], Body: r.Body[:0], ContentLength: -1}
		return err
	}
	r.head = append(r.head[:0], h...)
	return parseRequestHead(r)
}

// parseRequestHead parses r.head (which ends with its empty line) into r,
// after RFC 9112: a request line of method, target and HTTP/1.x; fields
// of a token name, a colon right after it and a value of visible
// characters, SP and HTAB. It refuses what a backend could frame or read
// differently from the ingress (request smuggling): line folding, a space
// before the colon, bare CR, Content-Length with Transfer-Encoding,
// differing Content-Lengths, Transfer-Encoding other than chunked, two
// Host fields.
func parseRequestHead(r *Request) error {
	*r = Request{head: r.head, Fields: r.Fields[:0], Body: r.Body[:0], ContentLength: -1}
	p := r.head
	for len(p) > 0 && (p[0] == '\n' || (p[0] == '\r' && len(p) > 1 && p[1] == '\n')) {
		if p[0] == '\r' {
			p = p[1:]
		}
		p = p[1:]
	}
	line, p, err := nextLine(p)
	if err != nil {
		return err
	}
	// method SP target SP HTTP/1.x
	i := 0
	for i < len(line) && isTchar[line[i]] {
		i++
	}
	if i == 0 || i >= len(line) || line[i] != ' ' {
		return badRequest("malformed request line")
	}
	r.Method, line = line[:i], line[i+1:]
	i = 0
	for i < len(line) && isTargetByte(line[i]) {
		i++
	}
	if i == 0 || i >= len(line) || line[i] != ' ' {
		return badRequest("malformed request target")
	}
	r.Target, line = line[:i], line[i+1:]
	minor, ok := parseVersion(line)
	if !ok {
		return badRequest("unsupported protocol version")
	}
	r.Minor = minor

	fields, err := parseFields(p, r.Fields)
	r.Fields = fields
	if err != nil {
		return err
	}
	return r.frame()
}

// frame reads the framing and connection fields.
func (r *Request) frame() error {
	var te, hosts int
	for i := range r.Fields {
		f := &r.Fields[i]
		switch f.Kind {
		case KindHost:
			if hosts++; hosts > 1 {
				return badRequest("more than one Host field")
			}
			if !ValidHost(f.Value) {
				return badRequest("invalid Host field")
			}
			r.Host = f.Value
		case KindContentLength:
			n, err := contentLength(f.Value, r.ContentLength)
			if err != nil {
				return err
			}
			r.ContentLength = n
		case KindTransferEncoding:
			te++
			if err := r.transferEncoding(f.Value); err != nil {
				return err
			}
		case KindExpect:
			if r.Minor >= 1 && equalFold(f.Value, "100-continue") {
				r.ExpectContinue = true
			}
		}
	}
	if te > 0 {
		switch {
		case r.Minor == 0:
			return badRequest("Transfer-Encoding in an HTTP/1.0 request")
		case !r.Chunked:
			return badRequest("Transfer-Encoding without chunked last")
		case r.ContentLength >= 0:
			return badRequest("both Content-Length and Transfer-Encoding")
		}
	}
	r.HasBody = r.Chunked || r.ContentLength >= 0
	closeOpt, keepAlive, err := markConnectionTokens(r.Fields)
	if err != nil {
		return badRequest(err.Error())
	}
	r.Close = closeOpt || (r.Minor == 0 && !keepAlive)
	return nil
}

// transferEncoding reads one Transfer-Encoding field: the only coding
// taken is chunked, once, last (a request in another coding could not be
// re-framed; RFC 9112 §6.1 answers 501 to a coding not understood).
func (r *Request) transferEncoding(v []byte) error {
	var err error
	n := 0
	eachToken(v, func(tok []byte) {
		n++
		switch {
		case err != nil:
		case !equalFold(tok, "chunked"):
			err = &Error{Status: 501, Reason: "a transfer coding other than chunked"}
		case r.Chunked:
			err = badRequest("chunked applied twice")
		default:
			r.Chunked = true
		}
	})
	if err == nil && n == 0 {
		err = badRequest("empty Transfer-Encoding")
	}
	return err
}

// contentLength reads a Content-Length value (a list of equal lengths is
// one length, RFC 9110 §8.6) against the one read before (-1: none).
func contentLength(v []byte, prev int64) (int64, error) {
	n := prev
	var err error
	count := 0
	eachToken(v, func(tok []byte) {
		count++
		m, ok := ParseUint(tok)
		switch {
		case err != nil:
		case !ok:
			err = badRequest("malformed Content-Length")
		case n >= 0 && m != n:
			err = badRequest("differing Content-Lengths")
		default:
			n = m
		}
	})
	if err == nil && count == 0 {
		err = badRequest("empty Content-Length")
	}
	return n, err
}

// parseVersion reads HTTP/1.x: the minor version, any 1.x above 1 read as
// 1.1 (RFC 9110 §2.5).
func parseVersion(v []byte) (int, bool) {
	if len(v) != 8 || string(v[:7]) != "HTTP/1." || v[7] < '0' || v[7] > '9' {
		return 0, false
	}
	return min(int(v[7]-'0'), 1), true
}

// nextLine splits off the line at the start of p, without its line end
// (LF, or CR LF). A CR anywhere else in it is refused.
func nextLine(p []byte) (line, rest []byte, err error) {
	for i, c := range p {
		switch c {
		case '\n':
			line, rest = p[:i], p[i+1:]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			return line, rest, nil
		case '\r':
			if i+1 >= len(p) || p[i+1] != '\n' {
				return nil, nil, badRequest("bare CR")
			}
		}
	}
	return nil, nil, badRequest("unterminated line")
}

// MaxFields bounds the field lines of one head (Apache httpd's
// LimitRequestFields is 100): a head of thousands of empty fields fits in
// 16 KiB and costs 60 times a plain request's CPU to parse and forward.
const MaxFields = 256

// parseFields parses the field lines of p, up to the empty line that ends
// it, appending to fields; more than MaxFields is refused.
func parseFields(p []byte, fields []Field) ([]Field, error) {
	for n := 0; ; n++ {
		if n > MaxFields {
			return fields, badRequest("more than 256 header fields")
		}
		line, rest, err := nextLine(p)
		if err != nil {
			return fields, err
		}
		p = rest
		if len(line) == 0 {
			return fields, nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			return fields, badRequest("obsolete line folding")
		}
		i := 0
		underscore := false
		for i < len(line) && isTchar[line[i]] {
			underscore = underscore || line[i] == '_'
			i++
		}
		if i == 0 || i >= len(line) || line[i] != ':' {
			return fields, badRequest("malformed field name")
		}
		name := line[:i]
		value := trimOWS(line[i+1:])
		for _, c := range value {
			if !isValueByte(c) {
				return fields, badRequest("invalid byte in a field value")
			}
		}
		k := KindOf(name)
		hop := k.hopByHop() || (underscore && underscoreAlias(name))
		fields = append(fields, Field{Name: name, Value: value, Kind: k, Hop: hop})
	}
}

// SetHost replaces the Host field's value, or adds a Host field.
func (r *Request) SetHost(v []byte) {
	r.Host = v
	for i := range r.Fields {
		if r.Fields[i].Kind == KindHost {
			r.Fields[i].Value = v
			return
		}
	}
	r.Fields = append(r.Fields, Field{Name: []byte("Host"), Value: v, Kind: KindHost})
}

// underscoreAlias reports a name with underscores that reads as a field
// the proxy knows when they are dashes (X_Forwarded_For, Transfer_Encoding,
// Content_Length): many servers (CGI, WSGI, Rack) turn both spellings into
// the same variable, so such a field would pass a client's forwarding claim
// on beside the proxy's own, or frame a body differently from the proxy
// (request smuggling). It is not forwarded.
func underscoreAlias(name []byte) bool {
	var b [24]byte
	if len(name) > len(b) {
		return false
	}
	for i, c := range name {
		if c == '_' {
			c = '-'
		}
		b[i] = c
	}
	return KindOf(b[:len(name)]) != KindOther
}

// trimHead drops a head copy grown over max bytes by an earlier request
// when the last one fitted in max, and with it everything that points into
// it (call it only once the request is done with).
func (r *Request) trimHead(max int) {
	if cap(r.head) > max && len(r.head) <= max {
		clear(r.Fields[:cap(r.Fields)])
		*r = Request{Fields: r.Fields[:0], Body: r.Body[:0]}
	}
}
