package h1

import (
	"bytes"
	"errors"
	"net/netip"
)

// Field is one header field as received: its name in the sender's case and
// its value without the surrounding whitespace. Both are slices of the
// message's own copy of its head, valid until the message is read again.
type Field struct {
	Name, Value []byte
	// Kind is what the name is to a proxy; KindOther for the rest.
	Kind Kind
	// Hop: the field is hop-by-hop (RFC 9110 §7.6.1): a hop-by-hop name, or
	// a name the message's Connection header lists. It is not forwarded.
	Hop bool
}

// Kind names the fields a proxy reads, frames by or drops.
type Kind uint8

const (
	KindOther Kind = iota
	KindHost
	KindContentLength
	KindTransferEncoding
	KindConnection
	KindExpect
	// Hop-by-hop names besides Connection (RFC 9110 §7.6.1, and the
	// Proxy-* fields nginx and net/http drop too). Upgrade is among them: the
	// data plane does not switch protocols.
	KindKeepAlive
	KindProxyConnection
	KindProxyAuthenticate
	KindProxyAuthorization
	KindTE
	KindTrailer
	KindUpgrade
	// Forwarding claims, which the ingress replaces.
	KindForwarded
	KindXForwardedFor
	KindXForwardedHost
	KindXForwardedProto
	KindXRealIP
	// The backend's feedback (docs/DESIGN.md, the backend contract).
	KindPrequalQueue
	KindPrequalServiceUs
)

// hopByHop: the kinds never forwarded, whatever Connection says.
func (k Kind) hopByHop() bool {
	return k == KindConnection || (k >= KindKeepAlive && k <= KindUpgrade)
}

var kindNames = []struct {
	name string
	kind Kind
}{
	{"host", KindHost},
	{"content-length", KindContentLength},
	{"transfer-encoding", KindTransferEncoding},
	{"connection", KindConnection},
	{"expect", KindExpect},
	{"keep-alive", KindKeepAlive},
	{"proxy-connection", KindProxyConnection},
	{"proxy-authenticate", KindProxyAuthenticate},
	{"proxy-authorization", KindProxyAuthorization},
	{"te", KindTE},
	{"trailer", KindTrailer},
	{"upgrade", KindUpgrade},
	{"forwarded", KindForwarded},
	{"x-forwarded-for", KindXForwardedFor},
	{"x-forwarded-host", KindXForwardedHost},
	{"x-forwarded-proto", KindXForwardedProto},
	{"x-real-ip", KindXRealIP},
	{"x-prequal-queue", KindPrequalQueue},
	{"x-prequal-service-us", KindPrequalServiceUs},
}

// byLen indexes kindNames by name length, so a lookup compares a name with
// at most a few candidates.
var byLen = func() (t [24][]int) {
	for i, k := range kindNames {
		t[len(k.name)] = append(t[len(k.name)], i)
	}
	return t
}()

// KindOf is the kind of a field name, compared without regard to ASCII case.
func KindOf(name []byte) Kind {
	if len(name) >= len(byLen) {
		return KindOther
	}
	for _, i := range byLen[len(name)] {
		if equalFold(name, kindNames[i].name) {
			return kindNames[i].kind
		}
	}
	return KindOther
}

// equalFold compares b with lower, which is lowercase ASCII, without
// regard to ASCII case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// equalFoldBytes compares two names without regard to ASCII case.
func equalFoldBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// isTchar: the characters of a token (RFC 9110 §5.6.2), which method names
// and field names are.
var isTchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// isValueByte: the bytes a field value may hold (RFC 9110 §5.5: VCHAR,
// obs-text, SP and HTAB); no other control byte, no NUL, CR or LF.
func isValueByte(c byte) bool { return c == '\t' || (c >= ' ' && c != 0x7f) }

// isTargetByte: the bytes a request target may hold: none of whitespace,
// control bytes or DEL (anything else is the backend's to judge, as nginx
// passes it).
func isTargetByte(c byte) bool { return c > ' ' && c != 0x7f }

// trimOWS drops the optional whitespace (SP, HTAB) around a value.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// eachToken calls f with each non-empty element of a comma-separated list
// (RFC 9110 §5.6.1), without its whitespace.
func eachToken(v []byte, f func(tok []byte)) {
	for len(v) > 0 {
		tok := v
		for i, c := range v {
			if c == ',' {
				tok, v = v[:i], v[i+1:]
				goto found
			}
		}
		v = nil
	found:
		if tok = trimOWS(tok); len(tok) > 0 {
			f(tok)
		}
	}
}

// maxConnectionOptions bounds the options the Connection fields of one
// message may name: each is compared with every field.
const maxConnectionOptions = 32

// errConnectionOptions is a message whose Connection fields name more
// options than maxConnectionOptions.
var errConnectionOptions = errors.New("h1: too many Connection options")

// markConnectionTokens marks hop-by-hop the fields that the Connection
// fields name, besides the hop-by-hop kinds marked when parsed. Host is
// never dropped, whatever a Connection header says (nor are the framing
// fields, which the proxy writes itself). It reports the close and
// keep-alive options.
func markConnectionTokens(fields []Field) (close, keepAlive bool, err error) {
	var opts [maxConnectionOptions][]byte
	n := 0
	for i := range fields {
		if fields[i].Kind != KindConnection {
			continue
		}
		eachToken(fields[i].Value, func(tok []byte) {
			switch {
			case equalFold(tok, "close"):
				close = true
			case equalFold(tok, "keep-alive"):
				keepAlive = true
			case n == len(opts):
				err = errConnectionOptions
			default:
				opts[n] = tok
				n++
			}
		})
	}
	if err != nil || n == 0 {
		return close, keepAlive, err
	}
	for j := range fields {
		f := &fields[j]
		if f.Hop || f.Kind == KindHost || f.Kind == KindContentLength || f.Kind == KindTransferEncoding {
			continue
		}
		for _, o := range opts[:n] {
			if equalFoldBytes(f.Name, o) {
				f.Hop = true
				break
			}
		}
	}
	return close, keepAlive, nil
}

// ParseUint parses a decimal number of at most 18 digits (no sign, no
// space); false for anything else.
func ParseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// ValidHost reports whether v is a host and optional port as a Host field
// or an authority carries them (RFC 9110 §7.2): an IPv6 address in
// brackets, or a name of letters, digits, "-", ".", "_" and "~" (an IPv4
// address among them), then optionally ":" and a port of 1 to 5 digits up
// to 65535. Stricter than RFC 3986's reg-name on purpose: no
// percent-encoding, sub-delims (a comma), IPvFuture or zone, which a router
// and a backend could read differently. Empty is valid (the caller decides
// whether a host is needed). A Host field that is not valid is answered
// 400 (RFC 9112 §3.2).
func ValidHost(v []byte) bool {
	if len(v) == 0 {
		return true
	}
	var port []byte
	hasPort := false
	if v[0] == '[' {
		end := bytes.IndexByte(v, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(string(v[1:end]))
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		if rest := v[end+1:]; len(rest) > 0 {
			if rest[0] != ':' {
				return false
			}
			port, hasPort = rest[1:], true
		}
	} else {
		host := v
		if i := bytes.IndexByte(v, ':'); i >= 0 {
			host, port, hasPort = v[:i], v[i+1:], true
		}
		if len(host) == 0 {
			return false
		}
		for _, c := range host {
			if !isUnreserved(c) {
				return false
			}
		}
	}
	if !hasPort {
		return true
	}
	if len(port) == 0 || len(port) > 5 {
		return false
	}
	n := 0
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// isUnreserved: ALPHA, DIGIT, "-", ".", "_", "~" (RFC 3986 §2.3).
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
