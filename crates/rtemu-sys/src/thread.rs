//! Starting a named thread where a failure is an error to report, not a panic.
//!
//! `std::thread::spawn` (and a scope's `spawn`) panics when the kernel refuses a thread: a
//! machine at its thread limit (`kernel.threads-max`, a cgroup's `pids.max`) or out of memory
//! for the stack. A user's command or the server then dies mid-way, possibly with objects
//! half made. [`spawn`] and [`spawn_scoped`] return a [`SpawnError`] instead, naming the
//! thread, so the caller can undo what it began and say what failed.

use std::fmt;
use std::io;
use std::thread::{Builder, JoinHandle, Scope, ScopedJoinHandle};

/// A thread could not be started.
#[derive(Debug)]
pub struct SpawnError {
    name: String,
    source: io::Error,
}

impl SpawnError {
    /// The name of the thread that was not started.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel's (or std's) reason.
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "starting the thread {}: {} (is the machine at its thread or memory limit?)",
            crate::terminal::quoted(&self.name),
            self.source
        )
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// For callers whose errors are `io::Error`: the kind is kept, the message names the thread.
impl From<SpawnError> for io::Error {
    fn from(e: SpawnError) -> Self {
        io::Error::new(e.source.kind(), e.to_string())
    }
}

/// A builder named `name`, or the error `Builder::spawn` would panic with instead.
fn named(name: String) -> Result<(Builder, String), SpawnError> {
    if name.contains('\0') {
        return Err(SpawnError {
            name,
            source: io::Error::new(io::ErrorKind::InvalidInput, "a thread's name has no NUL"),
        });
    }
    Ok((Builder::new().name(name.clone()), name))
}

/// Starts `f` on a new thread named `name` (shown by `ps -L`, `top -H` and in panics).
pub fn spawn<F, T>(name: impl Into<String>, f: F) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (builder, name) = named(name.into())?;
    start(builder, name, f)
}

/// Starts `f` on a new thread of `scope` named `name`; see [`spawn`].
pub fn spawn_scoped<'scope, 'env, F, T>(
    scope: &'scope Scope<'scope, 'env>,
    name: impl Into<String>,
    f: F,
) -> Result<ScopedJoinHandle<'scope, T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    let (builder, name) = named(name.into())?;
    builder
        .spawn_scoped(scope, f)
        .map_err(|source| SpawnError { name, source })
}

/// Starts `f` with `builder` (whose name is `name`).
fn start<F, T>(builder: Builder, name: String, f: F) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    builder
        .spawn(f)
        .map_err(|source| SpawnError { name, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack larger than any address space: the kernel refuses the thread, as it does a
    /// machine out of threads or memory.
    const NO_STACK: usize = 1 << 62;

    #[test]
    fn a_started_thread_has_its_name_and_result() {
        let t = spawn("rtemu-test-x", || {
            std::thread::current().name().map(str::to_owned)
        });
        assert_eq!(t.unwrap().join().unwrap().as_deref(), Some("rtemu-test-x"));
        let got = std::thread::scope(|s| {
            let t = spawn_scoped(s, "rtemu-test-y", || {
                std::thread::current().name().map(str::to_owned)
            });
            t.unwrap().join().unwrap()
        });
        assert_eq!(got.as_deref(), Some("rtemu-test-y"));
    }

    #[test]
    fn a_refused_thread_is_an_error_naming_it_not_a_panic() {
        let builder = Builder::new()
            .name("rtemu-huge".into())
            .stack_size(NO_STACK);
        let e = start(builder, "rtemu-huge".into(), || ()).unwrap_err();
        assert_eq!(e.name(), "rtemu-huge");
        let text = e.to_string();
        assert!(
            text.starts_with("starting the thread \"rtemu-huge\": "),
            "{text}"
        );
        assert!(text.contains("thread or memory limit"), "{text}");
        // The cause is the kernel's, kept as the source and in the io::Error's kind.
        let source = std::error::Error::source(&e).unwrap().to_string();
        assert!(text.contains(&source), "{text} lacks {source}");
        let kind = e.kind();
        assert_ne!(kind, io::ErrorKind::InvalidInput);
        let io: io::Error = e.into();
        assert_eq!(io.kind(), kind);
        assert_eq!(io.to_string(), text);
    }

    #[test]
    fn a_name_with_nul_is_refused_before_std_would_panic() {
        let e = spawn("bad\0name", || ()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(r#""bad\0name""#), "{e}");
        let e = std::thread::scope(|s| spawn_scoped(s, "x\0", || ()).map(|_| ()).unwrap_err());
        assert_eq!(e.name(), "x\0");
    }
}
