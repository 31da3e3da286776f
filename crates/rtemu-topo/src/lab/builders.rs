//! The builders' pool: a few threads that make namespaces and set up nodes at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::error::LabError;

/// How many threads make a lab's namespaces and set up its nodes at once. The work is the
/// kernel's, done in the calling thread's system calls, and much of it waits (for locks other
/// namespaces hold, for RCU) rather than computes: a few threads overlap the waits and use
/// both CPUs.
const BUILDERS: usize = 8;

/// `f` of every item, computed on up to [`BUILDERS`] threads (on this one if none can be
/// started), in the items' order. After a failure no new item is started; the error returned
/// is that of the first item in `items` that failed, whichever thread saw it, so a failing
/// `up` says the same every time.
pub(super) fn on_builders<T: Sync, R: Send + Sync>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, LabError> + Sync,
) -> Result<Vec<R>, LabError> {
    let next = AtomicUsize::new(0);
    let done: Vec<OnceLock<R>> = items.iter().map(|_| OnceLock::new()).collect();
    let failed = Mutex::new(None::<(usize, LabError)>);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(i) else { break };
        match f(item) {
            Ok(r) => {
                let _ = done[i].set(r);
            }
            Err(e) => {
                let mut failed = failed.lock().unwrap_or_else(PoisonError::into_inner);
                if failed.as_ref().is_none_or(|(j, _)| i < *j) {
                    *failed = Some((i, e));
                }
                // Items not yet started stay so.
                next.store(items.len(), Ordering::Relaxed);
                break;
            }
        }
    };
    std::thread::scope(|s| {
        let started = (0..BUILDERS.min(items.len()))
            .filter(|_| std::thread::Builder::new().spawn_scoped(s, work).is_ok())
            .count();
        if started == 0 {
            work();
        }
    });
    if let Some((_, e)) = failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        return Err(e);
    }
    Ok(done
        .into_iter()
        .map(|r| r.into_inner().expect("every item is done when none failed"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results come back in the items' order, however the threads shared them out.
    #[test]
    fn builders_return_each_result_in_its_items_place() {
        let items: Vec<u64> = (0..500).collect();
        let out = on_builders(&items, |&i| {
            // Uneven work, so the threads finish out of order.
            std::thread::sleep(std::time::Duration::from_micros((i * 7919) % 200));
            Ok(i * i)
        })
        .unwrap();
        assert_eq!(out, items.iter().map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(on_builders(&[] as &[u8], |_| Ok(())).unwrap(), []);
    }

    /// Every item from the tenth on fails: whichever thread fails first, the error reported
    /// is the tenth item's (taken before any later one, so always run to its end).
    #[test]
    fn builders_report_the_first_failing_item() {
        let items: Vec<usize> = (0..200).collect();
        for _ in 0..20 {
            let e = on_builders(&items, |&i| {
                std::thread::sleep(std::time::Duration::from_micros(((i * 31) % 7) as u64 * 50));
                match i {
                    i if i >= 10 => Err(LabError::NoHostInterface(format!("item {i}"))),
                    i => Ok(i),
                }
            })
            .unwrap_err();
            assert!(
                matches!(&e, LabError::NoHostInterface(n) if n == "item 10"),
                "{e}"
            );
        }
    }
}
