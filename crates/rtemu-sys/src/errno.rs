//! The two ways a libc call reports failure, turned into `io::Result`.
//!
//! Most calls return a negative value and leave the reason in `errno` ([`cvt`]); the `pthread_*`
//! family and `clock_nanosleep` return the error number itself and leave `errno` alone
//! ([`cvt_code`]).

use std::io;

/// `ret` when it is not negative, else the calling thread's `errno` (read at once, before any
/// other call can change it). Works for every return type of the C convention (`int`,
/// `ssize_t`, `long`).
#[inline]
pub fn cvt<T: Copy + Default + PartialOrd>(ret: T) -> io::Result<T> {
    if ret < T::default() {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Success when `err` is 0, else the error numbered `err`: for calls that return their error
/// number instead of setting `errno`.
#[inline]
pub fn cvt_code(err: libc::c_int) -> io::Result<()> {
    if err == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_negative_return_is_the_errno_the_call_left() {
        // SAFETY: closing descriptor -1 touches nothing; it fails with EBADF.
        #[allow(unsafe_code)]
        let ret = unsafe { libc::close(-1) };
        let err = cvt(ret).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn an_ssize_t_return_converts_too() {
        let mut byte = 0u8;
        // SAFETY: reading one byte from descriptor -1 into a live byte fails with EBADF.
        #[allow(unsafe_code)]
        let ret = unsafe { libc::read(-1, (&mut byte as *mut u8).cast(), 1) };
        assert_eq!(cvt(ret).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn an_error_number_return_is_that_error() {
        assert_eq!(cvt_code(0).ok(), Some(()));
        let err = cvt_code(libc::EINVAL).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }

    proptest! {
        #[test]
        fn a_non_negative_return_passes_through(ret in 0..=i32::MAX, wide in 0..=isize::MAX) {
            prop_assert_eq!(cvt(ret).unwrap(), ret);
            prop_assert_eq!(cvt(wide).unwrap(), wide);
        }

        #[test]
        fn any_non_zero_error_number_is_an_error(err in 1..4096i32) {
            prop_assert_eq!(cvt_code(err).unwrap_err().raw_os_error(), Some(err));
        }
    }
}
