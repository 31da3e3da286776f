//! Whether an allocation a user's numbers ask for fits in this machine's memory, asked before
//! it is made: a flag's range says what rtemu can do, the machine says what it can hold, and a
//! value past the second is refused with both numbers rather than ending in an allocation
//! abort or the out-of-memory killer.

use std::fmt;

/// Memory a run needs that this machine does not have available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryError {
    /// What needs it, as the user asked for it (`--block 67108864`).
    pub what: String,
    /// Bytes it needs.
    pub needed: u64,
    /// Bytes available (`MemAvailable`).
    pub available: u64,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b.div_ceil(1 << 20);
        write!(
            f,
            "{} needs about {} MiB of memory, more than the {} MiB this machine has available: \
             choose a smaller value",
            self.what,
            mib(self.needed),
            mib(self.available)
        )
    }
}

impl std::error::Error for MemoryError {}

/// The memory available for new allocations without swapping (`MemAvailable` of
/// `/proc/meminfo`), in bytes; `None` when the kernel does not say.
pub fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_available(&text)
}

fn parse_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses `needed` bytes for `what` when they are more than the memory available (see
/// [`available`]); a machine that does not say is not refused.
pub fn check(what: impl Into<String>, needed: u64) -> Result<(), MemoryError> {
    check_against(what, needed, available())
}

fn check_against(
    what: impl Into<String>,
    needed: u64,
    available: Option<u64>,
) -> Result<(), MemoryError> {
    match available {
        Some(available) if needed > available => Err(MemoryError {
            what: what.into(),
            needed,
            available,
        }),
        _ => Ok(()),
    }
}

/// `count` items of `size` bytes, saturating (a product past `u64` is more than any machine
/// has).
pub fn bytes(count: u64, size: usize) -> u64 {
    count.saturating_mul(size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let text = "MemTotal:       16000000 kB\nMemFree:  1 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(parse_available(text), Some(2048 * 1024));
        assert_eq!(parse_available("MemTotal: 5 kB\n"), None);
        // This machine says something sensible.
        let here = available().unwrap();
        assert!(here > 1 << 20, "{here}");
    }

    #[test]
    fn more_than_available_is_refused_with_both_numbers() {
        let e = check_against("--block 67108864", 5 << 30, Some(1 << 30)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--block 67108864 needs about 5120 MiB of memory, more than the 1024 MiB this \
             machine has available: choose a smaller value"
        );
        assert!(check_against("x", 1 << 20, Some(1 << 30)).is_ok());
        assert!(check_against("x", u64::MAX, None).is_ok());
        assert!(check("x", u64::MAX).is_err());
        assert_eq!(bytes(u64::MAX, 8), u64::MAX);
    }
}
