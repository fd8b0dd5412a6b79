//! Just enough JSON: a validating reader for the request body
//! {"iterations": n} and number formatting for responses.

/// Reads `{"iterations": n}` (other keys are allowed and ignored).
/// Returns None when the key is absent or null.
pub fn parse_iterations(body: &[u8]) -> Result<Option<u64>, String> {
    let text = std::str::from_utf8(body).map_err(|_| "body is not UTF-8".to_string())?;
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    if p.peek() != Some(b'{') {
        return Err("body is not a JSON object".into());
    }
    let mut found = None;
    p.object(|key, p| {
        if key == "iterations" {
            found = Some(p.iterations()?);
            Ok(())
        } else {
            p.value(0)
        }
    })?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing data at byte {}", p.i));
    }
    Ok(found.flatten())
}

const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }

    fn object(
        &mut self,
        mut member: impl FnMut(&str, &mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.expect(b':')?;
            self.ws();
            member(&key, self)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        if self.peek() != Some(b'"') {
            return Err(format!("expected a string at byte {}", self.i));
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let e = self.peek().ok_or("unterminated escape")?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e as char),
                        b'b' | b'f' | b'n' | b'r' | b't' => out.push(' '),
                        b'u' => {
                            let hex = self
                                .s
                                .get(self.i..self.i + 4)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .ok_or("bad \\u escape")?;
                            self.i += 4;
                            out.push(char::from_u32(hex).unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(format!("bad escape at byte {}", self.i - 1)),
                    }
                }
                0..=0x1f => return Err("control character in string".into()),
                _ => {
                    // Copy a whole UTF-8 sequence (the input is valid UTF-8).
                    let start = self.i - 1;
                    while self.peek().is_some_and(|b| (b & 0xC0) == 0x80) {
                        self.i += 1;
                    }
                    out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap_or(""));
                }
            }
        }
    }

    /// A number token, validated against the JSON grammar.
    fn number(&mut self) -> Result<&str, String> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.i;
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.i += 1;
            }
            p.i - s
        };
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(format!("bad number at byte {start}")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(format!("bad number at byte {start}"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(format!("bad number at byte {start}"));
            }
        }
        Ok(std::str::from_utf8(&self.s[start..self.i]).unwrap_or(""))
    }

    fn iterations(&mut self) -> Result<Option<u64>, String> {
        if self.s[self.i..].starts_with(b"null") {
            self.i += 4;
            return Ok(None);
        }
        let tok = self
            .number()
            .map_err(|_| "iterations: want a non-negative integer".to_string())?;
        tok.parse::<u64>()
            .map(Some)
            .map_err(|_| format!("iterations: {tok} is not a non-negative integer"))
    }

    fn value(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("JSON nested too deeply".into());
        }
        self.ws();
        match self.peek() {
            Some(b'{') => self.object(|_, p| p.value(depth + 1)),
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') | Some(b'f') | Some(b'n') => {
                for lit in [&b"true"[..], b"false", b"null"] {
                    if self.s[self.i..].starts_with(lit) {
                        self.i += lit.len();
                        return Ok(());
                    }
                }
                Err(format!("bad literal at byte {}", self.i))
            }
            _ => self.number().map(|_| ()),
        }
    }
}

/// Formats milliseconds with microsecond resolution (Rust never uses
/// exponent notation here, so the output is always valid JSON).
pub fn ms(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "null".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iterations() {
        let cases: &[(&str, Option<u64>)] = &[
            (r#"{"iterations": 1000}"#, Some(1000)),
            (r#" { "iterations" : 0 } "#, Some(0)),
            (
                r#"{"a": [1, {"b": null}], "iterations": 5, "c": "x\"y"}"#,
                Some(5),
            ),
            (r#"{"iterations": null}"#, None),
            (r#"{}"#, None),
            (r#"{"other": true}"#, None),
            (r#"{"it\u0065rations": 3}"#, Some(3)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_iterations(input.as_bytes()), Ok(*want), "{input}");
        }
    }

    #[test]
    fn rejects_bad_bodies() {
        let cases = [
            "",
            "[]",
            "1000",
            r#"{"iterations": -1}"#,
            r#"{"iterations": 1.5}"#,
            r#"{"iterations": "10"}"#,
            r#"{"iterations": 99999999999999999999999}"#,
            r#"{"iterations": 5"#,
            r#"{"iterations": 5} x"#,
            r#"{"iterations" 5}"#,
            r#"{"a": tru}"#,
            r#"{"a": 01}"#,
            r#"{"a": "unterminated}"#,
            r#"{"a": [1 2]}"#,
        ];
        for input in cases {
            assert!(
                parse_iterations(input.as_bytes()).is_err(),
                "{input:?} accepted"
            );
        }
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(100), "]".repeat(100));
        assert!(parse_iterations(deep.as_bytes()).is_err());
    }

    #[test]
    fn random_bodies_never_panic() {
        let seed = br#"{"a": [1, -2.5e3, true, null, {"b": "x\u00e9"}], "iterations": 12}"#;
        let mut rng = crate::dist::Rng::new(5);
        for _ in 0..20_000 {
            let mut bytes = seed.to_vec();
            for _ in 0..1 + rng.next_u64() % 3 {
                let pos = (rng.next_u64() as usize) % bytes.len();
                bytes[pos] = rng.next_u64() as u8;
            }
            let _ = parse_iterations(&bytes);
        }
    }

    #[test]
    fn formats_ms() {
        assert_eq!(ms(20.0), "20.000");
        assert_eq!(ms(0.0000001), "0.000");
        assert_eq!(ms(1e12), "1000000000000.000");
    }
}
