package prober

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// errMalformed is what the reply decoder reports for any invalid body. It
// carries no detail: building one would allocate on every bad answer.
var errMalformed = errors.New("malformed probe reply")

// wireReply is the backend's probe JSON; each has* flag tells absent (or
// null) from zero.
type wireReply struct {
	rif          int64
	latencyMS    float64
	timestampMS  uint64
	samples      int64
	qps, eps     float64
	utilization  float64
	hasRIF       bool
	hasLatency   bool
	hasTimestamp bool
	hasSamples   bool
	hasQPS       bool
	hasEPS       bool
	hasUtil      bool
}

// loadKnown reports whether the backend sent all three load fields.
func (w *wireReply) loadKnown() bool { return w.hasQPS && w.hasEPS && w.hasUtil }

// ParseReply decodes a probe answer received at now. It returns ProbeOK with
// the reply, ProbeMalformed for an invalid body, or ProbeStale when the
// backend's timestamp differs from now by more than staleAfter. A missing or
// zero timestamp (older backends) skips the staleness check; the pool ages
// probes from local receipt time either way. It does not allocate for a
// body whose keys carry no escapes.
func ParseReply(body []byte, now time.Time, staleAfter time.Duration) (loadbalancer.ProbeReply, loadbalancer.ProbeOutcome) {
	var r wireReply
	if decodeReply(body, &r) != nil {
		return loadbalancer.ProbeReply{}, loadbalancer.ProbeMalformed
	}
	if r.hasTimestamp && r.timestampMS != 0 {
		const maxMS = 1 << 53 // beyond this a float/int conversion would lie
		if r.timestampMS > maxMS {
			return loadbalancer.ProbeReply{}, loadbalancer.ProbeMalformed
		}
		skew := now.Sub(time.UnixMilli(int64(r.timestampMS)))
		if skew < 0 {
			skew = -skew
		}
		if skew > staleAfter {
			return loadbalancer.ProbeReply{}, loadbalancer.ProbeStale
		}
	}
	out := loadbalancer.ProbeReply{RIF: int(r.rif), QPS: r.qps, EPS: r.eps, Utilization: r.utilization, LoadKnown: r.loadKnown()}
	if r.hasLatency {
		out.LatencyKnown = true
		out.Latency = time.Duration(r.latencyMS * float64(time.Millisecond))
	}
	return out, loadbalancer.ProbeOK
}

// decodeReply fills r from one JSON object and checks every known field's
// type and range. Keys match exactly; the last of duplicate keys wins; null
// is the same as absent; unknown keys may hold any JSON value.
func decodeReply(body []byte, r *wireReply) error {
	s := scanner{b: body}
	s.ws()
	if !s.eat('{') {
		return errMalformed
	}
	s.ws()
	if !s.eat('}') {
		for {
			key, escaped, ok := s.str()
			if !ok {
				return errMalformed
			}
			quoted := s.b[s.last:s.i]
			s.ws()
			if !s.eat(':') {
				return errMalformed
			}
			s.ws()
			if escaped {
				// Rare: unescape the slow way so "r\u0069f" is still rif.
				var k string
				if json.Unmarshal(quoted, &k) != nil {
					return errMalformed
				}
				key = []byte(k)
			}
			if !s.field(key, r) {
				return errMalformed
			}
			s.ws()
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return errMalformed
			}
			s.ws()
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return errMalformed // trailing data
	}
	if !r.hasRIF {
		return errMalformed
	}
	// A load field given and then null is absent: no stale value.
	if !r.hasQPS {
		r.qps = 0
	}
	if !r.hasEPS {
		r.eps = 0
	}
	if !r.hasUtil {
		r.utilization = 0
	}
	const maxRIF = 1 << 31
	const maxLatencyMS = 24 * 3600 * 1000 // a day; anything above is nonsense
	switch {
	case r.rif < 0 || r.rif > maxRIF,
		r.hasLatency && !(r.latencyMS >= 0 && r.latencyMS <= maxLatencyMS),
		r.hasSamples && r.samples < 0,
		r.hasQPS && !(r.qps >= 0 && r.qps <= maxRate),
		r.hasEPS && !(r.eps >= 0 && r.eps <= maxRate),
		r.hasUtil && !(r.utilization >= 0 && r.utilization <= 1):
		return errMalformed
	}
	return nil
}

// maxRate bounds qps and eps; a backend answering more than this per second
// is lying.
const maxRate = 1e9

// field reads the value of key into r, or skips it for an unknown key.
func (s *scanner) field(key []byte, r *wireReply) bool {
	var ok bool
	switch string(key) { // compiled to comparisons: no allocation
	case "rif":
		r.hasRIF, ok = s.intValue(&r.rif)
	case "latency_median_ms":
		r.hasLatency, ok = s.floatValue(&r.latencyMS)
	case "timestamp_ms":
		r.hasTimestamp, ok = s.uintValue(&r.timestampMS)
	case "samples":
		r.hasSamples, ok = s.intValue(&r.samples)
	case "qps":
		r.hasQPS, ok = s.floatValue(&r.qps)
	case "eps":
		r.hasEPS, ok = s.floatValue(&r.eps)
	case "utilization":
		r.hasUtil, ok = s.floatValue(&r.utilization)
	default:
		return s.skip(0)
	}
	return ok
}

// scanner walks a JSON text without allocating. i is the read position;
// last is where the most recent string or number began.
type scanner struct {
	b    []byte
	i    int
	last int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) literal(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// str reads a string and returns its raw contents and whether they hold an
// escape.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	s.last = s.i
	if !s.eat('"') {
		return nil, false, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], escaped, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 {
					return nil, false, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				s.i += 6
			default:
				return nil, false, false
			}
		default:
			s.i++
		}
	}
	return nil, false, false
}

// number reads a number in JSON's grammar and returns its text and whether
// it is an integer (no fraction, no exponent).
func (s *scanner) number() (text []byte, integer, ok bool) {
	start := s.i
	s.last = start
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, false, false
	}
	integer = true
	if s.eat('.') {
		integer = false
		if s.digits() == 0 {
			return nil, false, false
		}
	}
	if s.eat('e') || s.eat('E') {
		integer = false
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return nil, false, false
		}
	}
	return s.b[start:s.i], integer, true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// intValue reads null or an integer that fits an int64. It returns whether
// a number was present and whether the value was valid.
func (s *scanner) intValue(v *int64) (present, ok bool) {
	if s.literal("null") {
		return false, true
	}
	text, integer, ok := s.number()
	if !ok || !integer {
		return false, false
	}
	neg := text[0] == '-'
	if neg {
		text = text[1:]
	}
	var u uint64
	for _, c := range text {
		if u > (1<<63)/10 {
			return false, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u == 0:
		*v = 0
	case neg && u <= 1<<63:
		*v = -int64(u-1) - 1
	case !neg && u < 1<<63:
		*v = int64(u)
	default:
		return false, false
	}
	return true, true
}

// uintValue reads null or a non-negative integer that fits a uint64.
func (s *scanner) uintValue(v *uint64) (present, ok bool) {
	if s.literal("null") {
		return false, true
	}
	text, integer, ok := s.number()
	if !ok || !integer || text[0] == '-' {
		return false, false
	}
	var u uint64
	for _, c := range text {
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return false, false
		}
		u = u*10 + d
	}
	*v = u
	return true, true
}

// floatValue reads null or a number that fits a float64.
func (s *scanner) floatValue(v *float64) (present, ok bool) {
	if s.literal("null") {
		return false, true
	}
	text, _, ok := s.number()
	if !ok {
		return false, false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return false, false // out of range, as encoding/json says
	}
	*v = f
	return true, true
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// skip reads any JSON value.
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth || s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		s.ws()
		if s.eat(closer) {
			return true
		}
		for {
			if c == '{' {
				if _, _, ok := s.str(); !ok {
					return false
				}
				s.ws()
				if !s.eat(':') {
					return false
				}
				s.ws()
			}
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(closer) {
				return true
			}
			if !s.eat(',') {
				return false
			}
			s.ws()
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		_, _, ok := s.number()
		return ok
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
