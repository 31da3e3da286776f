//! Probabilities as integer thresholds.
//!
//! Configuration speaks `f64` (or netem's percentages); the packet path compares a 32-bit
//! random integer against a precomputed threshold, as netem does, so a decision costs one
//! draw and one comparison and never depends on floating-point rounding at run time.

use serde::{Deserialize, Serialize};

/// A probability in `[0, 1]`, stored both as the configured value and as a threshold on a
/// uniform 32-bit draw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Probability {
    value: f64,
    /// A draw `x` hits when `x < threshold`; `u64` so that probability 1 hits every draw.
    threshold: u64,
}

/// A probability outside `[0, 1]` (or not a number).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("probability {0} is outside 0..=1")]
pub struct OutOfRange(pub f64);

impl Probability {
    /// Never.
    pub const ZERO: Probability = Probability {
        value: 0.0,
        threshold: 0,
    };
    /// Always.
    pub const ONE: Probability = Probability {
        value: 1.0,
        threshold: 1 << 32,
    };

    /// A probability from a value in `[0, 1]`.
    pub fn new(value: f64) -> Result<Self, OutOfRange> {
        if !(0.0..=1.0).contains(&value) {
            return Err(OutOfRange(value));
        }
        let threshold = (value * 4_294_967_296.0).round() as u64;
        Ok(Probability { value, threshold })
    }

    /// The configured value.
    pub fn value(self) -> f64 {
        self.value
    }

    /// True if the probability is zero, so a stage can be skipped without drawing.
    pub fn is_zero(self) -> bool {
        self.threshold == 0
    }

    /// Whether a uniform 32-bit draw falls below the threshold.
    #[inline]
    pub fn hit(self, draw: u32) -> bool {
        (draw as u64) < self.threshold
    }
}

impl Default for Probability {
    fn default() -> Self {
        Probability::ZERO
    }
}

impl TryFrom<f64> for Probability {
    type Error = OutOfRange;
    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Probability::new(value)
    }
}

impl From<Probability> for f64 {
    fn from(p: Probability) -> f64 {
        p.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_are_exact() {
        assert!(!Probability::ZERO.hit(0));
        assert!(Probability::ONE.hit(u32::MAX));
        assert!(Probability::new(1.0).unwrap().hit(u32::MAX));
    }

    #[test]
    fn out_of_range_is_rejected() {
        assert!(Probability::new(1.01).is_err());
        assert!(Probability::new(-0.1).is_err());
        assert!(Probability::new(f64::NAN).is_err());
    }
}
