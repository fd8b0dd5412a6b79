// Package h1 is the ingress's HTTP/1.1 data plane: a server that reads each
// request whole on its connection's goroutine, a parser for requests and
// answers that copies a message head once and points into it, and a writer
// that appends the forwarded head straight from the parsed fields.
//
// Threat model. Clients and backends are both untrusted. A message the
// proxy forwards must be framed and read by the next hop exactly as the
// proxy read it (no request smuggling, no answer that ends up as another
// request's), and the router must match the path the backend will serve.
// One client must not exhaust what the others need: connections are capped
// (the longest-idle one is shed), a new connection gets a short wait for its
// first byte, heads and bodies are bounded, and every read and write has a
// deadline.
//
// Taken (RFC 9112): method SP target SP HTTP/1.x (any 1.x above 1 reads as
// 1.1); lines ending in CRLF or a bare LF; empty lines before the request
// line; field values with obs-text; a Content-Length list of equal values;
// Transfer-Encoding: chunked with chunk extensions (skipped) and a trailer
// section (read and dropped, never merged into the head).
//
// Refused with 400: obs-fold; whitespace between a field name and its
// colon; a field name that is not a token; a bare CR, NUL, DEL or other
// control byte in a value or the target; two Host fields, none in HTTP/1.1,
// or one that is not a host and port (an IPv6 literal in brackets, or
// letters, digits, '-', '.', '_', '~'; a port of 1 to 5 digits up to 65535;
// no percent-encoding, userinfo, comma or other sub-delims); more than 32
// Connection options; Content-Length with Transfer-Encoding; differing or
// malformed Content-Lengths; chunked twice; Transfer-Encoding in HTTP/1.0;
// a malformed chunk size or a chunk longer than its size; a head over its
// limit (16 KiB in the ingress) or with more than MaxFields fields. Refused with 501: a transfer coding other
// than chunked. Refused with 413: a body over the server's MaxBodySize.
// Not forwarded: a field whose name with underscores reads as one the proxy
// knows with dashes (X_Forwarded_For, Content_Length), which CGI-style
// servers merge with the real one.
//
// An answer from a backend is read the same way (a malformed one is an
// error the proxy turns into 502): a 1xx is skipped, a 101 refused,
// Transfer-Encoding wins over Content-Length, a coding other than chunked
// is refused, and a body without either ends with the connection.
package h1
