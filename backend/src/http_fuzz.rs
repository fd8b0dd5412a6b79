//! A structured fuzzer for the request parser. It knows the HTTP/1.1 and
//! chunked grammar: it generates pipelined requests (methods, targets,
//! headers, Content-Length and chunked bodies with extensions and
//! trailers, stray line breaks, bare LF), breaks one part of a request on
//! purpose (chunk sizes at the 64-bit edges, bad CRLFs, conflicting
//! lengths, folded or oversized headers), and mutates raw bytes. Every
//! input is read in random-sized pieces.
//!
//! Oracles: a well-formed request must parse to exactly what was generated;
//! a request broken on purpose must fail with the class of error that its
//! defect calls for; anything else must not panic, and whatever parses must
//! respect the caps.
//!
//! `cargo test` runs a fixed 20,000 cases. The long run is ignored by
//! default: `PREQUAL_FUZZ_SECONDS=300 cargo test --release http_fuzz::long
//! -- --ignored --nocapture` (PREQUAL_FUZZ_SEED picks the seed).

use crate::dist::Rng;
use crate::http::tests::Mock;
use crate::http::{Conn, ParseError, Request, MAX_BODY_BYTES, MAX_HEADER_BYTES};
use std::io::Cursor;
use std::time::{Duration, Instant};

/// What parsing one generated request must give.
#[derive(Debug)]
enum Want {
    Ok(Request),
    Bad,
    BodyTooLarge,
    HeadersTooLarge,
    /// Truncated input: the connection just ends.
    Io,
}

struct Gen {
    rng: Rng,
}

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }

    fn token(&mut self, max: u64) -> String {
        const T: &[u8] =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";
        (0..1 + self.below(max))
            .map(|_| T[self.below(T.len() as u64) as usize] as char)
            .collect()
    }

    /// Header value text: visible ASCII and inner spaces, trimmed.
    fn value(&mut self, max: u64) -> String {
        let v: String = (0..self.below(max))
            .map(|_| (b' ' + self.below(95) as u8) as char)
            .collect();
        v.trim().to_string()
    }

    fn eol(&mut self) -> &'static str {
        if self.chance(5) {
            "\n"
        } else {
            "\r\n"
        }
    }

    fn body(&mut self) -> Vec<u8> {
        let len = match self.below(1000) {
            0 => MAX_BODY_BYTES as u64,
            1..=20 => self.below(70_000),
            _ => self.below(64),
        };
        // Any bytes, CR and LF included; cheap to make.
        let (a, b) = (self.rng.next_u64() as u8, self.rng.next_u64() as u8 | 1);
        (0..len)
            .map(|i| a.wrapping_add(b.wrapping_mul(i as u8)))
            .collect()
    }

    /// One request, possibly broken on purpose in one place.
    fn request(&mut self, out: &mut Vec<u8>) -> Want {
        let broken = if self.chance(30) { self.below(14) } else { 99 };
        // Set where the defect is actually written (some need a body).
        let mut defect = None;
        for _ in 0..self.below(3) {
            out.extend_from_slice(self.eol().as_bytes());
        }
        let method = if self.chance(80) {
            self.pick(&["GET", "POST", "HEAD", "PUT", "DELETE"])
                .to_string()
        } else {
            self.token(8)
        };
        let mut target = format!("/{}", self.token(12).replace(['#', '%'], "x"));
        if self.chance(50) {
            target.push_str(&format!("?iterations={}", self.below(5000)));
        }
        let http10 = self.chance(10);
        let version = if http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        let mut head = match broken {
            0 => format!("{method} {target}"),
            1 => format!("{method} http://h{target} {version}"),
            2 => format!("{method} {target} HTTP/2.0"),
            _ => format!("{method} {target} {version}"),
        };
        if broken <= 2 {
            defect = Some(Want::Bad);
        }
        head.push_str(self.eol());
        let mut headers = Vec::new();
        let mut keep_alive = !http10;
        let mut connection_seen = false;
        for _ in 0..self.below(6) {
            let (n, v) = match self.below(6) {
                0 => {
                    let v = self.pick(&["close", "keep-alive", "Close", "upgrade"]);
                    // Only the first Connection header counts.
                    match v {
                        "close" | "Close" if !connection_seen => keep_alive = false,
                        "keep-alive" if !connection_seen => keep_alive = true,
                        _ => {}
                    }
                    connection_seen = true;
                    ("Connection".to_string(), v.to_string())
                }
                1 => ("Host".to_string(), self.token(20)),
                _ => (format!("X-{}", self.token(10)), self.value(40)),
            };
            let pad = if self.chance(20) { " \t" } else { "" };
            head.push_str(&format!("{n}:{pad}{v}{pad}{}", self.eol()));
            headers.push((n, v));
        }
        match broken {
            3 => {
                head.push_str(&format!("X-Fold: a{} b{}", self.eol(), self.eol()));
                defect = Some(Want::Bad);
            }
            4 => {
                head.push_str(&format!("Bad Name: x{}", self.eol()));
                defect = Some(Want::Bad);
            }
            5 => {
                let big = "a".repeat(MAX_HEADER_BYTES);
                head.push_str(&format!("X-Big: {big}{}", self.eol()));
                defect = Some(Want::HeadersTooLarge);
            }
            _ => {}
        }
        let body = if self.chance(40) {
            self.body()
        } else {
            Vec::new()
        };
        let chunked = !body.is_empty() && self.chance(60);
        let mut tail = Vec::new();
        let mut want_body = body.clone();
        if chunked {
            head.push_str(&format!("Transfer-Encoding: chunked{}", self.eol()));
            headers.push(("Transfer-Encoding".into(), "chunked".into()));
            if broken == 6 {
                head.push_str(&format!("Content-Length: {}{}", body.len(), self.eol()));
                defect = defect.or(Some(Want::Bad));
            }
            if let Some(d) = self.chunks(&body, broken, &mut tail) {
                defect = defect.or(Some(d));
            }
        } else if !body.is_empty() || self.chance(10) {
            let mut len = body.len().to_string();
            let d = match broken {
                7 => {
                    len = format!("{}, {}", body.len(), body.len() + 1);
                    Some(Want::Bad)
                }
                8 => {
                    len = "99999999999999999999999".into();
                    Some(Want::BodyTooLarge)
                }
                9 => {
                    len = format!("+{len}");
                    Some(Want::Bad)
                }
                _ => None,
            };
            if d.is_some() {
                defect = defect.or(d);
            }
            head.push_str(&format!("Content-Length: {len}{}", self.eol()));
            headers.push(("Content-Length".into(), len));
            tail.extend_from_slice(&body);
        } else {
            want_body.clear();
        }
        head.push_str(self.eol());
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(&tail);
        defect.unwrap_or(Want::Ok(Request {
            method,
            target,
            headers,
            body: want_body,
            keep_alive,
        }))
    }

    /// The chunked encoding of `body` in random pieces, with extensions and
    /// trailers; `broken` 10-13 breaks one chunk: what it then wants.
    fn chunks(&mut self, body: &[u8], broken: u64, out: &mut Vec<u8>) -> Option<Want> {
        let defect = match broken {
            10..=12 => Some(Want::Bad),
            13 => Some(Want::BodyTooLarge),
            _ => None,
        };
        let mut rest = body;
        // The chunk to break: one of the first three, or the last if fewer
        // (a break after earlier chunks is what overflowed body.len() + size).
        let break_at = self.below(3);
        let mut i = 0;
        let mut broke = false;
        while !rest.is_empty() {
            let n = if self.chance(50) {
                rest.len()
            } else {
                1 + self.below(rest.len() as u64) as usize
            };
            let mut size = format!("{n:x}");
            if self.chance(20) {
                size = size.to_uppercase();
            }
            if self.chance(10) {
                size = format!("000{size}");
            }
            let breaking = !broke && (i == break_at || n == rest.len());
            if breaking {
                broke = true;
                match broken {
                    10 => size = self.pick(&["", "-1", "+1", "0x1", "g", " ;"]).into(),
                    11 => {
                        size = self
                            .pick(&[
                                "ffffffffffffffff",
                                "8000000000000000",
                                "10000000000000000",
                                "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
                            ])
                            .into()
                    }
                    13 => size = self.pick(&["7fffffffffffffff", "100001", "fffffff"]).into(),
                    _ => {}
                }
            }
            out.extend_from_slice(size.as_bytes());
            if self.chance(20) {
                out.extend_from_slice(format!(";{}={}", self.token(5), self.token(5)).as_bytes());
            }
            out.extend_from_slice(self.eol().as_bytes());
            out.extend_from_slice(&rest[..n]);
            if breaking && broken == 12 {
                out.extend_from_slice(b"X\r\n");
            } else {
                out.extend_from_slice(b"\r\n");
            }
            rest = &rest[n..];
            i += 1;
        }
        out.extend_from_slice(b"0");
        out.extend_from_slice(self.eol().as_bytes());
        for _ in 0..self.below(3) {
            out.extend_from_slice(format!("X-T-{}: {}", self.token(6), self.token(6)).as_bytes());
            out.extend_from_slice(self.eol().as_bytes());
        }
        out.extend_from_slice(self.eol().as_bytes());
        defect
    }
}

thread_local! {
    /// Cases where parse_simple accepted the input (checked against
    /// read_request).
    static SIMPLE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn seen_simple(n: u64) {
    SIMPLE.with(|c| c.set(c.get() + n));
}

/// Runs one case: 1-3 pipelined requests, perhaps truncated, perhaps with
/// raw byte mutations (then only "no panic" and the caps are checked).
fn run_case(g: &mut Gen, seen: &mut [u64; 6]) -> Result<(), String> {
    let mut bytes = Vec::new();
    let mut wants = Vec::new();
    for _ in 0..1 + g.below(3) {
        let start = bytes.len();
        let want = g.request(&mut bytes);
        let stop = !matches!(want, Want::Ok(_));
        wants.push((start, want));
        if stop {
            break;
        }
    }
    // Cut the last request short (only a well-formed one, whose cut is sure
    // to leave it incomplete).
    if let Some((start, Want::Ok(_))) = wants.last() {
        if g.chance(15) && bytes.len() - start > 1 {
            let cut = start + 1 + g.below((bytes.len() - start - 1) as u64) as usize;
            bytes.truncate(cut);
            wants.last_mut().unwrap().1 = Want::Io;
        }
    }
    let raw = g.chance(20);
    if raw {
        for _ in 0..1 + g.below(4) {
            let pos = g.below(bytes.len() as u64 + 1) as usize;
            let b = g.rng.next_u64() as u8;
            match g.below(4) {
                0 if pos < bytes.len() => bytes[pos] = b,
                1 => bytes.insert(pos, b),
                2 if pos < bytes.len() => {
                    bytes.remove(pos);
                }
                _ => {
                    let edge = g.pick(&[
                        "ffffffffffffffff",
                        "
",
                        "
",
                        ";",
                        "0

",
                    ]);
                    bytes.splice(pos..pos, edge.bytes());
                }
            }
        }
    }
    let step = match g.below(6) {
        0 if bytes.len() < 100_000 => 1,
        1 => 1 + g.below(16) as usize,
        2 => 64,
        3 => 1000,
        _ => 65536,
    };
    // The reactor answers what parse_simple accepts without read_request:
    // whatever it accepts, read_request must read the same request from
    // the same bytes, and consume the same bytes.
    if let Some((simple, used)) = crate::http::parse_simple(&bytes) {
        let mut full = Conn::new(Mock {
            input: Cursor::new(bytes.clone()),
            output: Vec::new(),
            step: 65536,
        });
        match full.read_request(|| true) {
            Ok(r) if r == simple => {}
            other => {
                return Err(format!(
                    "parse_simple read {}, read_request {}",
                    short(&format!("{simple:?}")),
                    short(&format!("{other:?}"))
                ))
            }
        }
        let (mock, buf) = full.into_parts();
        let left = buf.len() + bytes.len() - mock.input.position() as usize;
        if left != bytes.len() - used {
            return Err(format!(
                "parse_simple used {used} bytes, read_request {}",
                bytes.len() - left
            ));
        }
        seen_simple(1);
    }
    let mut conn = Conn::new(Mock {
        input: Cursor::new(bytes),
        output: Vec::new(),
        step,
    });
    for (i, (_, want)) in wants.iter().enumerate() {
        let got = conn.read_request(|| true);
        if let Ok(r) = &got {
            if r.body.len() > MAX_BODY_BYTES || !r.target.starts_with('/') {
                return Err(format!("request {i}: caps or grammar broken: {r:?}"));
            }
        }
        if raw {
            seen[5] += 1;
            if got.is_err() {
                return Ok(());
            }
            continue;
        }
        let ok = match (want, &got) {
            (Want::Ok(w), Ok(r)) => w == r,
            (Want::Bad, Err(ParseError::Bad(_)))
            | (Want::BodyTooLarge, Err(ParseError::BodyTooLarge))
            | (Want::HeadersTooLarge, Err(ParseError::HeadersTooLarge))
            | (Want::Io, Err(ParseError::Io | ParseError::Closed)) => true,
            _ => false,
        };
        seen[match want {
            Want::Ok(_) => 0,
            Want::Bad => 1,
            Want::BodyTooLarge => 2,
            Want::HeadersTooLarge => 3,
            Want::Io => 4,
        }] += ok as u64;
        if !ok {
            return Err(format!(
                "request {i} (read step {step}): want {}, got {}",
                short(&format!("{want:?}")),
                short(&format!("{got:?}"))
            ));
        }
        if got.is_err() {
            return Ok(());
        }
    }
    if !raw {
        match conn.read_request(|| true) {
            Err(ParseError::Closed) => {}
            other => {
                return Err(format!(
                    "after the last request: {}",
                    short(&format!("{other:?}"))
                ))
            }
        }
    }
    Ok(())
}

fn short(s: &str) -> String {
    if s.len() <= 600 {
        return s.to_string();
    }
    let cut = (0..=600)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}… ({} bytes)", &s[..cut], s.len())
}

/// Runs cases until `cases` are done or `until` passes; the first failure
/// panics with the seed and case number (a case depends only on those).
/// Returns the cases run and the requests checked per outcome: well-formed,
/// Bad, BodyTooLarge, HeadersTooLarge, truncated, and raw-mutated.
fn fuzz(seed: u64, cases: u64, until: Option<Instant>) -> (u64, [u64; 6]) {
    let mut n = 0;
    let mut seen = [0u64; 6];
    while n < cases && until.is_none_or(|t| Instant::now() < t) {
        // One generator per case, so any case reruns alone from its numbers.
        let mut g = Gen {
            rng: Rng::new(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        };
        let out =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&mut g, &mut seen)));
        match out {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("fuzz seed {seed} case {n}: {e}"),
            Err(_) => panic!("fuzz seed {seed} case {n}: the parser panicked"),
        }
        n += 1;
    }
    (n, seen)
}

#[test]
fn structured_fuzz_20k() {
    let (n, seen) = fuzz(15, 20_000, None);
    assert_eq!(n, 20_000);
    let simple = SIMPLE.with(|c| c.get());
    assert!(simple >= 100, "parse_simple accepted only {simple} cases");
    // Every outcome is exercised, so no oracle is vacuous.
    for (i, what) in [
        "well-formed",
        "Bad",
        "BodyTooLarge",
        "HeadersTooLarge",
        "truncated",
        "raw",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            seen[i] >= 100,
            "only {} {what} requests checked: {seen:?}",
            seen[i]
        );
    }
}

#[test]
#[ignore = "long run: PREQUAL_FUZZ_SECONDS=300 cargo test --release http_fuzz::long -- --ignored --nocapture"]
fn long() {
    let secs: u64 = std::env::var("PREQUAL_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let seed: u64 = std::env::var("PREQUAL_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let start = Instant::now();
    let (n, seen) = fuzz(seed, u64::MAX, Some(start + Duration::from_secs(secs)));
    println!(
        "fuzz seed {seed}: {n} cases in {:.0?} without a failure; requests checked \
         (well-formed, Bad, BodyTooLarge, HeadersTooLarge, truncated, raw): {seen:?}",
        start.elapsed()
    );
}
