//! Parsing of human durations ("50ms", "500us", "1.5s") used by flags and the
//! antagonist schedule.

use std::time::Duration;

/// Parses a duration with a unit suffix: ns, us (or µs), ms, s, m, h.
/// A bare "0" is accepted; any other number needs a unit so that "20" is
/// never silently read as seconds or milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit (want e.g. 20ms, 500us, 1s)"))?;
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("{s:?} has no number (want e.g. 20ms, 500us, 1s)"));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a number with a unit (want e.g. 20ms)"))?;
    let nanos_per_unit: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => {
            return Err(format!(
                "{s:?} has unknown unit {unit:?} (want ns, us, ms, s, m or h)"
            ))
        }
    };
    let nanos = value * nanos_per_unit;
    if !nanos.is_finite() || nanos > 1e18 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        let cases = [
            ("50ms", Duration::from_millis(50)),
            ("500us", Duration::from_micros(500)),
            ("500µs", Duration::from_micros(500)),
            ("1s", Duration::from_secs(1)),
            ("1.5s", Duration::from_millis(1500)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("10ns", Duration::from_nanos(10)),
            ("0", Duration::ZERO),
            (" 3ms ", Duration::from_millis(3)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        for input in ["", "20", "ms", "1x", "-1s", "1.2.3s", "abc", "1e400s"] {
            assert!(parse_duration(input).is_err(), "input {input:?} accepted");
        }
    }
}
