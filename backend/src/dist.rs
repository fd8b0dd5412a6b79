//! Seeded randomness and the service-time distributions (fixed, exponential,
//! and the paper's normal with sigma = mu, truncated at 0).

use std::fmt;

/// splitmix64: tiny, fast, and good enough for drawing service times.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1]: never 0, so ln() is always finite.
    pub fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Fixed,
    Exp,
    Normal,
}

impl Distribution {
    pub fn parse(s: &str) -> Result<Distribution, String> {
        match s {
            "fixed" => Ok(Distribution::Fixed),
            "exp" => Ok(Distribution::Exp),
            "normal" => Ok(Distribution::Normal),
            _ => Err(format!("{s:?} is not one of fixed, exp, normal")),
        }
    }

    /// Draws a value with the given mean. Normal is N(mean, sigma=mean)
    /// truncated at 0 (negative draws become 0, as the paper's "truncated"
    /// cost), so its mean is about 1.083 × mean.
    pub fn draw(self, mean: f64, rng: &mut Rng) -> f64 {
        match self {
            Distribution::Fixed => mean,
            Distribution::Exp => -mean * rng.next_open01().ln(),
            Distribution::Normal => {
                // Box–Muller; one of the pair is enough here.
                let u1 = rng.next_open01();
                let u2 = rng.next_open01();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                (mean + mean * z).max(0.0)
            }
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Distribution::Fixed => "fixed",
            Distribution::Exp => "exp",
            Distribution::Normal => "normal",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(d: Distribution, mu: f64, n: usize) -> (f64, f64) {
        let mut rng = Rng::new(42);
        let mut sum = 0.0;
        let mut min = f64::MAX;
        for _ in 0..n {
            let v = d.draw(mu, &mut rng);
            sum += v;
            min = min.min(v);
        }
        (sum / n as f64, min)
    }

    #[test]
    fn fixed_is_exact() {
        let mut rng = Rng::new(1);
        for _ in 0..10 {
            assert_eq!(Distribution::Fixed.draw(20.0, &mut rng), 20.0);
        }
    }

    #[test]
    fn exp_mean() {
        let (mean, min) = mean_of(Distribution::Exp, 20.0, 200_000);
        assert!((mean - 20.0).abs() < 0.3, "mean {mean}");
        assert!(min >= 0.0);
    }

    #[test]
    fn truncated_normal_mean() {
        // E[max(0, X)] for X ~ N(mu, mu) is mu * (Phi(1) + phi(1)) ≈ 1.0833 mu.
        let (mean, min) = mean_of(Distribution::Normal, 20.0, 200_000);
        let want = 20.0 * (0.841_344_7 + 0.241_970_7);
        assert!((mean - want).abs() < 0.3, "mean {mean}, want {want}");
        assert_eq!(min, 0.0, "truncation should produce zeros");
    }

    #[test]
    fn seeded_draws_repeat() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn open01_bounds() {
        let mut rng = Rng::new(3);
        for _ in 0..10_000 {
            let u = rng.next_open01();
            assert!(u > 0.0 && u <= 1.0);
        }
    }

    #[test]
    fn parse_names() {
        assert_eq!(Distribution::parse("exp"), Ok(Distribution::Exp));
        assert!(Distribution::parse("gamma")
            .unwrap_err()
            .contains("fixed, exp, normal"));
    }
}
