//! A small HTTP/1.1 server side: request parsing (request line, headers,
//! Content-Length and chunked bodies, pipelining, Expect: 100-continue) and
//! response writing, over any Read + Write stream.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A response header's value: a fixed string or a number, written without
/// an allocation of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderValue {
    Str(&'static str),
    Int(u64),
}

impl std::fmt::Display for HeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderValue::Str(s) => f.write_str(s),
            HeaderValue::Int(n) => write!(f, "{n}"),
        }
    }
}

/// Cap on the request line plus headers.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Cap on a request body (the only body we expect is {"iterations": n}),
/// after chunked decoding: the sum of all chunk sizes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Cap on bytes buffered ahead of the request being handled (pipelining):
/// one whole request at most.
const MAX_BUFFERED_BYTES: usize = MAX_HEADER_BYTES + MAX_BODY_BYTES;
/// Cap on the trailer section of a chunked body (all trailer lines).
pub const MAX_TRAILER_BYTES: usize = MAX_HEADER_BYTES;
/// Default time from a request's first byte to its last.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest chunk size accepted as a number (what an i64 offset holds, as in
/// nginx and Go); above it the chunk line is malformed (400), not too large.
const MAX_CHUNK_SIZE_VALUE: u64 = i64::MAX as u64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query as sent, e.g. "/work?iterations=5".
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
}

impl Request {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug)]
pub enum ParseError {
    /// The peer closed (or we are shutting down) between requests: not an error.
    Closed,
    /// Malformed request: answer 400 and close.
    Bad(String),
    /// Headers too large: answer 431 and close.
    HeadersTooLarge,
    /// Body too large: answer 413 and close.
    BodyTooLarge,
    /// A transfer coding other than chunked: answer 501 and close (RFC
    /// 9112 6.1: the body's framing is unknown).
    NotImplemented(String),
    /// The request did not arrive in full within the request timeout:
    /// answer 408 and close.
    Timeout,
    /// I/O failure in the middle of a request: just close.
    Io,
}

impl ParseError {
    /// The status and message to answer with, if any.
    pub fn response(&self) -> Option<(u16, String)> {
        match self {
            ParseError::Bad(m) => Some((400, format!("bad request: {m}\n"))),
            ParseError::HeadersTooLarge => Some((431, "request headers too large\n".into())),
            ParseError::BodyTooLarge => Some((413, "request body too large\n".into())),
            ParseError::NotImplemented(m) => Some((501, format!("not implemented: {m}\n"))),
            ParseError::Timeout => Some((408, "request not received in time\n".into())),
            ParseError::Closed | ParseError::Io => None,
        }
    }
}

fn bad<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError::Bad(msg.into()))
}

/// A connection: the stream plus bytes read but not yet consumed (pipelining).
pub struct Conn<S> {
    stream: S,
    buf: Vec<u8>,
    /// From a request's first byte until it has been read in full.
    request_timeout: Duration,
}

impl<S: Read + Write> Conn<S> {
    #[cfg(test)]
    pub fn new(stream: S) -> Conn<S> {
        Conn::from_parts(stream, Vec::with_capacity(4096))
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Conn<S> {
        self.request_timeout = timeout;
        self
    }

    pub fn stream(&mut self) -> &mut S {
        &mut self.stream
    }

    /// A connection whose first bytes were read elsewhere (the reactor).
    pub fn from_parts(stream: S, buf: Vec<u8>) -> Conn<S> {
        Conn {
            stream,
            buf,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// The stream and the bytes read but not yet consumed.
    pub fn into_parts(self) -> (S, Vec<u8>) {
        (self.stream, self.buf)
    }

    /// Bytes read from the stream and not yet consumed by a request.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Reads more bytes. Read timeouts on the stream surface as WouldBlock or
    /// TimedOut; `idle_stop` is asked then whether to give up (shutdown, idle
    /// timeout), but only between requests. A started request must be complete
    /// within the request timeout, checked after every read, so a client that
    /// drips one byte at a time cannot hold the connection past it.
    fn fill(
        &mut self,
        started: &mut Option<Instant>,
        idle_stop: &mut dyn FnMut() -> bool,
    ) -> Result<(), ParseError> {
        let mut chunk = [0u8; 8192];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return if self.buf.is_empty() && started.is_none() {
                        Err(ParseError::Closed)
                    } else {
                        Err(ParseError::Io)
                    }
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    let t = started.get_or_insert_with(Instant::now);
                    if t.elapsed() > self.request_timeout {
                        return Err(ParseError::Timeout);
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    match started {
                        None if self.buf.is_empty() && idle_stop() => {
                            return Err(ParseError::Closed)
                        }
                        Some(t) if t.elapsed() > self.request_timeout => {
                            return Err(ParseError::Timeout)
                        }
                        _ => {}
                    }
                }
                Err(_) => return Err(ParseError::Io),
            }
        }
    }

    /// Reads one request. `idle_stop` is polled on read timeouts while the
    /// connection is idle; returning true ends the connection (Closed).
    pub fn read_request(
        &mut self,
        mut idle_stop: impl FnMut() -> bool,
    ) -> Result<Request, ParseError> {
        let mut started = (!self.buf.is_empty()).then(Instant::now);
        // Where the search for the end of the headers resumes, so that a
        // client sending one byte per read costs linear, not quadratic, time.
        let mut scanned = 0;
        let header_end = loop {
            // Tolerate stray CRLFs between requests (RFC 9112 2.2); drained
            // at once, since removing them one by one is quadratic.
            let stray = self
                .buf
                .iter()
                .take_while(|&&b| b == b'\r' || b == b'\n')
                .count();
            if stray > 0 {
                self.buf.drain(..stray);
                scanned = 0;
            }
            if let Some(end) = find_header_end(&self.buf, scanned) {
                break end;
            }
            if self.buf.len() > MAX_HEADER_BYTES {
                return Err(ParseError::HeadersTooLarge);
            }
            // The end marker is at most 3 bytes ("\n\r\n"): re-scan only those.
            scanned = self.buf.len().saturating_sub(3);
            self.fill(&mut started, &mut idle_stop)?;
        };
        if header_end.0 > MAX_HEADER_BYTES {
            return Err(ParseError::HeadersTooLarge);
        }
        let head = std::str::from_utf8(&self.buf[..header_end.0])
            .map_err(|_| ParseError::Bad("header bytes are not UTF-8".into()))?;
        let (mut req, http10) = parse_head(head)?;
        self.buf.drain(..header_end.1);

        let kind = body_kind(&req)?;
        let body_to_come = match kind {
            BodyKind::None => false,
            BodyKind::Length(n) if n > MAX_BODY_BYTES => return Err(ParseError::BodyTooLarge),
            BodyKind::Length(n) => n > 0,
            BodyKind::Chunked => true,
        };
        // Only an HTTP/1.1 client waiting to send a body is told to go on
        // (RFC 9110 10.1.1): a 1.0 client or a body-less request would read
        // the interim answer as the answer to its request.
        let expects = req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
        if expects && body_to_come && !http10 {
            self.stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .map_err(|_| ParseError::Io)?;
        }
        match kind {
            BodyKind::None => {}
            BodyKind::Length(n) => {
                while self.buf.len() < n {
                    self.fill(&mut started, &mut idle_stop)?;
                }
                req.body = self.buf.drain(..n).collect();
            }
            BodyKind::Chunked => req.body = self.read_chunked(&mut started, &mut idle_stop)?,
        }
        Ok(req)
    }

    fn read_line(
        &mut self,
        started: &mut Option<Instant>,
        idle_stop: &mut dyn FnMut() -> bool,
    ) -> Result<String, ParseError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                // The same cap whether the line came in one read or many.
                if pos > MAX_HEADER_BYTES {
                    return Err(ParseError::HeadersTooLarge);
                }
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = String::from_utf8(line)
                    .map_err(|_| ParseError::Bad("chunk line is not UTF-8".into()))?;
                return Ok(line.trim_end_matches(['\r', '\n']).to_string());
            }
            if self.buf.len() > MAX_HEADER_BYTES {
                return Err(ParseError::HeadersTooLarge);
            }
            self.fill(started, idle_stop)?;
        }
    }

    fn read_chunked(
        &mut self,
        started: &mut Option<Instant>,
        idle_stop: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<u8>, ParseError> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line(started, idle_stop)?;
            let size = chunk_size(&line)?;
            if size == 0 {
                // Trailers, up to the empty line; they are read and dropped.
                let mut trailer_bytes = 0usize;
                loop {
                    let line = self.read_line(started, idle_stop)?;
                    if line.is_empty() {
                        return Ok(body);
                    }
                    trailer_bytes += line.len() + 2;
                    if trailer_bytes > MAX_TRAILER_BYTES {
                        return Err(ParseError::HeadersTooLarge);
                    }
                }
            }
            // body.len() <= MAX_BODY_BYTES always holds, so this cannot wrap;
            // comparing in u64 keeps a huge size from being added at all.
            if size > (MAX_BODY_BYTES - body.len()) as u64 {
                return Err(ParseError::BodyTooLarge);
            }
            let size = size as usize;
            while self.buf.len() < size + 2 {
                self.fill(started, idle_stop)?;
            }
            body.extend(self.buf.drain(..size));
            let crlf: Vec<u8> = self.buf.drain(..2).collect();
            if crlf != b"\r\n" {
                return bad("chunk data not followed by CRLF");
            }
        }
    }
}

/// The size of a chunk from its line: 1*HEXDIG, then optional whitespace
/// and `;extensions` (ignored). Parsed with checked arithmetic: a size that
/// does not fit in 64 bits, or is above i64::MAX, is malformed (400).
fn chunk_size(line: &str) -> Result<u64, ParseError> {
    let digits = ows(line.split(';').next().unwrap_or(""));
    if digits.is_empty() {
        return bad(format!("chunk line {line:?} has no size"));
    }
    let mut size: u64 = 0;
    for c in digits.chars() {
        let d = c.to_digit(16).ok_or_else(|| {
            ParseError::Bad(format!("bad chunk size {digits:?} (want hex digits)"))
        })?;
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .filter(|&s| s <= MAX_CHUNK_SIZE_VALUE)
            .ok_or_else(|| {
                ParseError::Bad(format!(
                    "chunk size {digits:?} out of range (at most {MAX_CHUNK_SIZE_VALUE:x})"
                ))
            })?;
    }
    Ok(size)
}

impl Conn<TcpStream> {
    /// Whether the peer has closed its side (EOF) or the socket failed, without
    /// blocking. Bytes that arrived meanwhile (a pipelined next request) are
    /// kept for the next read_request, so an EOF behind them is seen too;
    /// peeking would only ever see those bytes. With the buffer at its cap
    /// the answer is "still there" (the caller bounds its wait otherwise).
    pub fn peer_gone(&mut self) -> bool {
        if self.buf.len() >= MAX_BUFFERED_BYTES {
            return false;
        }
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut chunk = [0u8; 8192];
        let gone = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    if self.buf.len() >= MAX_BUFFERED_BYTES {
                        break false;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break e.kind() != ErrorKind::WouldBlock,
            }
        };
        let _ = self.stream.set_nonblocking(false);
        gone
    }
}

/// A complete request without a body at the front of `buf`, and the bytes
/// it takes. None when it is incomplete, has (or announces) a body, expects
/// 100-continue, or is anything a full read_request must judge (errors,
/// blank lines before it, oversized headers): then the caller hands the
/// bytes to read_request, which answers as it always has.
pub fn parse_simple(buf: &[u8]) -> Option<(Request, usize)> {
    if buf.first().is_none_or(|&b| b == b'\r' || b == b'\n') {
        return None;
    }
    let (end, next) = find_header_end(buf, 0)?;
    if end > MAX_HEADER_BYTES {
        return None;
    }
    let (req, _) = parse_head(std::str::from_utf8(&buf[..end]).ok()?).ok()?;
    let no_body = req.headers.iter().all(|(n, _)| {
        !n.eq_ignore_ascii_case("content-length")
            && !n.eq_ignore_ascii_case("transfer-encoding")
            && !n.eq_ignore_ascii_case("expect")
    });
    no_body.then_some((req, next))
}

/// Whether `buf` holds a whole request head (after any stray line breaks),
/// or more bytes than a head may have: either way read_request can judge
/// it now. Until then a connection needs no thread.
pub fn head_complete(buf: &[u8]) -> bool {
    let stray = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    buf.len() - stray > MAX_HEADER_BYTES || find_header_end(&buf[stray..], 0).is_some()
}

/// (end of the header text, start of the body): the header block ends at the
/// first empty line, CRLF or bare LF. The search starts at `from` (bytes
/// before it were searched already).
fn find_header_end(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from.min(buf.len());
    while let Some(off) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + off;
        let rest = &buf[nl + 1..];
        if rest.starts_with(b"\r\n") {
            return Some((nl + 1, nl + 3));
        }
        if rest.starts_with(b"\n") {
            return Some((nl + 1, nl + 2));
        }
        i = nl + 1;
    }
    None
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Optional whitespace (RFC 9110 5.6.3) trimmed: spaces and tabs only.
/// str::trim would also take Unicode spaces such as U+00A0, so that
/// "chunked\u{a0}" passed as chunked.
fn ows(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// The request and whether it is HTTP/1.0.
fn parse_head(head: &str) -> Result<(Request, bool), ParseError> {
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or("");
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return bad(format!(
            "request line {request_line:?} is not METHOD TARGET VERSION"
        ));
    };
    if !is_token(method) {
        return bad(format!("bad method {method:?}"));
    }
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return bad(format!("bad target {target:?} (want an origin-form path)"));
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return bad(format!("unsupported version {version:?}")),
    };
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            return bad("obsolete header line folding");
        }
        let Some((name, value)) = line.split_once(':') else {
            return bad(format!("header line {line:?} has no colon"));
        };
        if !is_token(name) {
            return bad(format!("bad header name {name:?}"));
        }
        // A bare CR, NUL, DEL or another control character (HTAB aside)
        // in a value: another parser may split or end the line there.
        if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return bad(format!(
                "header {name:?} has a control character (bare CR, NUL, ...) in its value"
            ));
        }
        headers.push((name.to_string(), ows(value).to_string()));
    }
    let mut req = Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
        body: Vec::new(),
        keep_alive: !http10,
    };
    if let Some(conn) = req.header("connection") {
        let has = |t: &str| conn.split(',').any(|x| ows(x).eq_ignore_ascii_case(t));
        if has("close") {
            req.keep_alive = false;
        } else if has("keep-alive") {
            req.keep_alive = true;
        }
    }
    Ok((req, http10))
}

enum BodyKind {
    None,
    Length(usize),
    Chunked,
}

fn body_kind(req: &Request) -> Result<BodyKind, ParseError> {
    let te: Vec<&str> = req
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
        .map(|(_, v)| v.as_str())
        .collect();
    let cl: Vec<&str> = req
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.as_str())
        .collect();
    if !te.is_empty() {
        if !cl.is_empty() {
            return bad("both Transfer-Encoding and Content-Length");
        }
        // Only chunked, once: another coding (gzip, chunked) could not be
        // decoded here, so its body's end is unknown (501, as the ingress).
        let codings = te.join(",");
        let mut chunked = 0;
        for coding in codings.split(',').map(ows).filter(|c| !c.is_empty()) {
            if !coding.eq_ignore_ascii_case("chunked") {
                return Err(ParseError::NotImplemented(format!(
                    "Transfer-Encoding {codings:?}: only chunked is supported"
                )));
            }
            chunked += 1;
        }
        if chunked != 1 {
            return bad(format!(
                "Transfer-Encoding {codings:?} (want chunked, once)"
            ));
        }
        return Ok(BodyKind::Chunked);
    }
    let mut length = None;
    for v in cl.iter().flat_map(|v| v.split(',')) {
        let v = ows(v);
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return bad(format!("bad Content-Length {v:?}"));
        }
        let n: usize = v.parse().map_err(|_| ParseError::BodyTooLarge)?;
        if length.is_some_and(|l| l != n) {
            return bad("conflicting Content-Length values");
        }
        length = Some(n);
    }
    Ok(length.map_or(BodyKind::None, BodyKind::Length))
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Writes a complete response with Content-Length; one write call, so a
/// response is never split into several small TCP segments.
pub fn write_response(
    w: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
    keep_alive: bool,
    extra_headers: &[(&str, HeaderValue)],
    head_only: bool,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(160 + body.len());
    write!(
        out,
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        status,
        reason(status),
        content_type,
        body.len()
    )?;
    for (n, v) in extra_headers {
        write!(out, "{n}: {v}\r\n")?;
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(body);
    }
    w.write_all(&out)?;
    w.flush()
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::io::Cursor;

    /// An in-memory stream: reads from `input` in pieces of `step` bytes,
    /// records writes.
    pub struct Mock {
        pub input: Cursor<Vec<u8>>,
        pub output: Vec<u8>,
        pub step: usize,
    }

    impl Read for Mock {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.step);
            self.input.read(&mut buf[..n])
        }
    }

    impl Write for Mock {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn conn(input: &str, step: usize) -> Conn<Mock> {
        Conn::new(Mock {
            input: Cursor::new(input.as_bytes().to_vec()),
            output: Vec::new(),
            step,
        })
    }

    fn read(input: &str) -> Result<Request, ParseError> {
        conn(input, 7).read_request(|| false)
    }

    #[test]
    fn simple_get() {
        let r = read("GET /work?iterations=5 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path(), "/work");
        assert_eq!(r.query(), "iterations=5");
        assert_eq!(r.header("HOST"), Some("x"));
        assert!(r.keep_alive);
        assert!(r.body.is_empty());
    }

    #[test]
    fn post_with_body_and_pipelining() {
        let body = r#"{"iterations": 7}"#;
        let input = format!(
            "POST /work HTTP/1.1\r\nContent-Length: {}\r\n\r\n{}GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
            body.len(),
            body
        );
        for step in [1, 3, 1000] {
            let mut c = conn(&input, step);
            let r = c.read_request(|| false).unwrap();
            assert_eq!(r.body, body.as_bytes(), "step {step}");
            let r2 = c.read_request(|| false).unwrap();
            assert_eq!(r2.path(), "/healthz");
            assert!(!r2.keep_alive);
            assert!(matches!(c.read_request(|| false), Err(ParseError::Closed)));
        }
    }

    #[test]
    fn keep_alive_rules() {
        assert!(!read("GET / HTTP/1.0\r\n\r\n").unwrap().keep_alive);
        assert!(
            read("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                .unwrap()
                .keep_alive
        );
        assert!(
            !read("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n")
                .unwrap()
                .keep_alive
        );
        assert!(read("GET / HTTP/1.1\n\n").unwrap().keep_alive);
    }

    #[test]
    fn chunked_body() {
        let r = read(
            "POST /work HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"it\r\n3\r\nera\r\n0\r\nX-T: 1\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, b"{\"itera");
    }

    #[test]
    fn chunk_sizes_use_checked_arithmetic() {
        let chunked = |size: &str| {
            read(&format!(
                "POST /work HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\nab\r\n0\r\n\r\n"
            ))
        };
        // 2^64 - 1 used to overflow `body.len() + size` and panic the thread.
        for size in [
            "ffffffffffffffff",
            "FFFFFFFFFFFFFFFF;ext=1",
            "8000000000000000",
            "10000000000000000",
            "fffffffffffffffffffffffffffffffff",
            "+2",
            "-2",
            "0x2",
            "",
            " ;x",
        ] {
            match chunked(size) {
                Err(ParseError::Bad(m)) => assert!(m.contains("chunk"), "{size:?}: {m}"),
                other => panic!("{size:?}: want Bad, got {other:?}"),
            }
        }
        // After a first chunk: release builds wrapped 2 + (2^64 - 1) to 1,
        // passed the cap check, then panicked slicing the buffer.
        match read(
            "POST /work HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\nffffffffffffffff\r\nab\r\n0\r\n\r\n",
        ) {
            Err(ParseError::Bad(m)) => assert!(m.contains("out of range"), "{m}"),
            other => panic!("second chunk ffffffffffffffff: want Bad, got {other:?}"),
        }
        assert_eq!(chunked("0002").unwrap().body, b"ab");
        assert_eq!(chunked("2 ; a=b").unwrap().body, b"ab");
        // In range but larger than the body cap: 413, before any byte is read.
        assert!(matches!(
            chunked(&format!("{:x}", MAX_BODY_BYTES + 1)),
            Err(ParseError::BodyTooLarge)
        ));
        assert!(matches!(
            chunked("7fffffffffffffff"),
            Err(ParseError::BodyTooLarge)
        ));
        // The cap is on the sum of the chunks.
        let half = MAX_BODY_BYTES / 2;
        let input = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{half:x}\r\n{}\r\n{:x}\r\n",
            "a".repeat(half),
            half + 1
        );
        assert!(matches!(read(&input), Err(ParseError::BodyTooLarge)));
        let exact = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{half:x}\r\n{}\r\n{half:x}\r\n{}\r\n0\r\n\r\n",
            "a".repeat(half),
            "b".repeat(half)
        );
        assert_eq!(read(&exact).unwrap().body.len(), MAX_BODY_BYTES);
    }

    #[test]
    fn chunk_line_cap_does_not_depend_on_read_sizes() {
        // A chunk extension longer than the cap: 431 whether it arrives a
        // few bytes per read or in one read (which used to pass it).
        let long = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;{}\r\n{{}}\r\n0\r\n\r\n",
            "e".repeat(MAX_HEADER_BYTES + 10)
        );
        for step in [7, 1 << 20] {
            assert!(
                matches!(
                    conn(&long, step).read_request(|| false),
                    Err(ParseError::HeadersTooLarge)
                ),
                "step {step}"
            );
        }
        // Within the cap an extension is ignored, in any read size.
        let ok = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;{}\r\n{{}}\r\n0\r\n\r\n",
            "e".repeat(MAX_HEADER_BYTES - 100)
        );
        for step in [7, 1 << 20] {
            assert_eq!(conn(&ok, step).read_request(|| false).unwrap().body, b"{}");
        }
    }

    #[test]
    fn trailers_are_capped() {
        let many = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n{}\r\n",
            "X-T: 1\r\n".repeat(MAX_TRAILER_BYTES / 8 + 1)
        );
        assert!(matches!(read(&many), Err(ParseError::HeadersTooLarge)));
    }

    /// A stream that returns one byte per read, sleeping `gap` before each:
    /// a client dripping its request.
    struct Drip {
        input: Cursor<Vec<u8>>,
        gap: Duration,
    }

    impl Read for Drip {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            std::thread::sleep(self.gap);
            self.input.read(&mut buf[..1])
        }
    }

    impl Write for Drip {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn dripping_client_is_cut_off_at_the_request_deadline() {
        // Every read succeeds, so no read timeout ever fires: only the check
        // after each read can stop it. 5 ms per byte against a 20 ms deadline
        // must stop long before the 200-byte request is complete (sleep
        // never returns early, so this does not depend on the host's speed).
        let request = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(180));
        let mut c = Conn::new(Drip {
            input: Cursor::new(request.clone().into_bytes()),
            gap: Duration::from_millis(5),
        })
        .with_request_timeout(Duration::from_millis(20));
        assert!(matches!(c.read_request(|| false), Err(ParseError::Timeout)));
        assert!(c.input_left() > 100, "read too much: {}", c.input_left());
        assert_eq!(
            ParseError::Timeout.response().map(|r| r.0),
            Some(408),
            "the client is told why"
        );
        // The same drip within a generous deadline is a fine request.
        let mut c = Conn::new(Drip {
            input: Cursor::new(request.into_bytes()),
            gap: Duration::ZERO,
        })
        .with_request_timeout(Duration::from_secs(3600));
        assert!(c.read_request(|| false).is_ok());
    }

    impl Conn<Drip> {
        fn input_left(&self) -> usize {
            self.stream.input.get_ref().len() - self.stream.input.position() as usize
        }
    }

    #[test]
    fn stray_line_breaks_between_requests_are_skipped() {
        let input = format!(
            "{}GET /a HTTP/1.1\r\n\r\n\r\n\nGET /b HTTP/1.1\r\n\r\n",
            "\r\n".repeat(5000)
        );
        let mut c = conn(&input, 1000);
        assert_eq!(c.read_request(|| false).unwrap().path(), "/a");
        assert_eq!(c.read_request(|| false).unwrap().path(), "/b");
    }

    #[test]
    fn expect_continue_is_answered() {
        let mut c = conn(
            "POST /work HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
            100,
        );
        let r = c.read_request(|| false).unwrap();
        assert_eq!(r.body, b"{}");
        assert_eq!(c.stream().output, b"HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn control_characters_in_header_values_are_rejected() {
        // A bare CR used to stay inside the value; a proxy that ends the
        // line there reads a different header set than we do.
        for value in ["a\rb", "a\r", "a\0b", "a\x7fb", "a\x01"] {
            let input = format!("GET / HTTP/1.1\r\nX-A: {value}\r\n\r\n");
            match read(&input) {
                Err(ParseError::Bad(m)) => assert!(m.contains("control"), "{value:?}: {m}"),
                other => panic!("{value:?}: want Bad, got {other:?}"),
            }
            assert!(parse_simple(input.as_bytes()).is_none(), "{value:?}");
        }
        let r = read("GET / HTTP/1.1\r\nX-A: a\tb \t\r\n\r\n").unwrap();
        assert_eq!(
            r.header("x-a"),
            Some("a\tb"),
            "HTAB is allowed, OWS trimmed"
        );
    }

    #[test]
    fn only_ascii_whitespace_is_trimmed() {
        // str::trim took U+00A0 too: "chunked\u{a0}" framed a body as
        // chunked where another parser sees an unknown coding.
        match read("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\u{a0}\r\n\r\n0\r\n\r\n") {
            Err(ParseError::NotImplemented(_)) => {}
            other => panic!("chunked+NBSP: want NotImplemented, got {other:?}"),
        }
        for input in [
            "POST / HTTP/1.1\r\nContent-Length: 2\u{a0}\r\n\r\n{}",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\u{a0}\r\n{}\r\n0\r\n\r\n",
        ] {
            assert!(matches!(read(input), Err(ParseError::Bad(_))), "{input:?}");
        }
        let r = read("GET / HTTP/1.1\r\nConnection: \u{a0}close\r\n\r\n").unwrap();
        assert!(r.keep_alive, "\\u{{a0}}close is not the close option");
        assert_eq!(
            read("POST / HTTP/1.1\r\nTransfer-Encoding:\t chunked \t\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
                .unwrap()
                .body,
            b"{}"
        );
    }

    #[test]
    fn transfer_codings_other_than_chunked_get_501() {
        for te in ["gzip, chunked", "gzip", "chunked, gzip", "x-custom,chunked"] {
            let input = format!("POST / HTTP/1.1\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
            match read(&input) {
                Err(e @ ParseError::NotImplemented(_)) => {
                    assert_eq!(e.response().map(|r| r.0), Some(501), "{te:?}")
                }
                other => panic!("{te:?}: want NotImplemented, got {other:?}"),
            }
        }
        // Two separate fields are one list.
        assert!(matches!(
            read("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            Err(ParseError::NotImplemented(_))
        ));
        for te in ["chunked, chunked", ",", ""] {
            let input = format!("POST / HTTP/1.1\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
            assert!(matches!(read(&input), Err(ParseError::Bad(_))), "{te:?}");
        }
        assert_eq!(
            read("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked,\r\n\r\n0\r\n\r\n")
                .unwrap()
                .body,
            b""
        );
    }

    #[test]
    fn continue_only_for_http11_with_a_body_to_come() {
        let interim = |input: &str| {
            let mut c = conn(input, 100);
            let r = c.read_request(|| false);
            (r, c.stream().output.clone())
        };
        for input in [
            // HTTP/1.0 has no 1xx answers.
            "POST /work HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
            // Nothing to send: the answer itself comes next.
            "GET /work HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            "POST /work HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
        ] {
            let (r, out) = interim(input);
            assert!(r.is_ok(), "{input:?}: {r:?}");
            assert!(
                out.is_empty(),
                "{input:?}: sent {:?}",
                String::from_utf8_lossy(&out)
            );
        }
        // Too large: 413 at once, never an invitation to send it.
        let (r, out) = interim(&format!(
            "POST /work HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY_BYTES + 1
        ));
        assert!(matches!(r, Err(ParseError::BodyTooLarge)));
        assert!(out.is_empty());
        let (r, out) = interim(
            "POST /work HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        );
        assert_eq!(r.unwrap().body, b"{}");
        assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn malformed_requests() {
        let cases = [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET http://x/ HTTP/1.1\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
        ];
        for input in cases {
            match read(input) {
                Err(ParseError::Bad(_)) => {}
                other => panic!("{input:?}: want Bad, got {other:?}"),
            }
        }
    }

    #[test]
    fn size_caps() {
        let big = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEADER_BYTES)
        );
        assert!(matches!(read(&big), Err(ParseError::HeadersTooLarge)));
        let endless = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEADER_BYTES * 2));
        assert!(matches!(read(&endless), Err(ParseError::HeadersTooLarge)));
        let body = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY_BYTES + 1
        );
        assert!(matches!(read(&body), Err(ParseError::BodyTooLarge)));
        assert!(matches!(
            read("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            Err(ParseError::BodyTooLarge)
        ));
    }

    #[test]
    fn truncated_request_is_an_io_error_and_clean_close_is_closed() {
        assert!(matches!(read("GET / HTTP/1.1\r\n"), Err(ParseError::Io)));
        assert!(matches!(
            read("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            Err(ParseError::Io)
        ));
        assert!(matches!(read(""), Err(ParseError::Closed)));
    }

    #[test]
    fn random_mutations_never_panic() {
        // A poor man's fuzzer: flip, insert and delete bytes of valid
        // requests; the parser must answer every input without panicking.
        let seeds = [
            "GET /work?iterations=5 HTTP/1.1\r\nHost: x\r\n\r\n",
            "POST /work HTTP/1.1\r\nContent-Length: 17\r\n\r\n{\"iterations\": 7}",
            "POST /work HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ];
        let mut rng = crate::dist::Rng::new(11);
        for i in 0..20_000 {
            let mut bytes = seeds[i % seeds.len()].as_bytes().to_vec();
            for _ in 0..1 + rng.next_u64() % 4 {
                let pos = (rng.next_u64() as usize) % (bytes.len() + 1);
                let b = rng.next_u64() as u8;
                match rng.next_u64() % 3 {
                    0 if pos < bytes.len() => bytes[pos] = b,
                    1 => bytes.insert(pos, b),
                    _ if pos < bytes.len() => {
                        bytes.remove(pos);
                    }
                    _ => {}
                }
            }
            let mut c = Conn::new(Mock {
                input: Cursor::new(bytes),
                output: Vec::new(),
                step: 1 + (i % 13),
            });
            for _ in 0..3 {
                if c.read_request(|| true).is_err() {
                    break;
                }
            }
        }
    }

    #[test]
    fn response_format() {
        let mut out = Vec::new();
        write_response(
            &mut out,
            503,
            "text/plain",
            b"full\n",
            false,
            &[
                ("X-A", HeaderValue::Str("1")),
                ("X-B", HeaderValue::Int(42)),
            ],
            false,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A: 1\r\nX-B: 42\r\nConnection: close\r\n\r\nfull\n"
        );
    }
}
