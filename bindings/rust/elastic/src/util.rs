//! Conversions between Rust values and the C ABI's strings, buffers,
//! timeouts and library-owned memory.
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::time::Duration;

use elastic_sys as sys;

use crate::error::{Error, Result};

/// How long a call may wait (the C ABI's `timeout_ms`).
///
/// ```
/// use elastic::Timeout;
/// use std::time::Duration;
/// let wait: Timeout = Duration::from_secs(5).into();
/// assert_eq!(wait, Timeout::After(Duration::from_secs(5)));
/// let _ = (Timeout::Default, Timeout::NoLimit);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// The handle's default (`ELASTIC_TIMEOUT_DEFAULT`): the store's per-call
    /// timeout, the worker's `store_timeout`; no limit where a handle has none.
    Default,
    /// Wait without limit.
    NoLimit,
    /// Wait up to this long; zero does not wait at all.
    After(Duration),
}

impl From<Duration> for Timeout {
    fn from(duration: Duration) -> Timeout {
        Timeout::After(duration)
    }
}

impl Timeout {
    /// Milliseconds for C: sub-millisecond waits round up (only zero means
    /// "do not wait") and long ones are capped at `i32::MAX` (about 24 days).
    pub(crate) fn as_ms(self) -> c_int {
        match self {
            Timeout::Default => sys::ELASTIC_TIMEOUT_DEFAULT,
            Timeout::NoLimit => sys::ELASTIC_TIMEOUT_NO_LIMIT,
            Timeout::After(d) if d.is_zero() => 0,
            Timeout::After(d) => d.as_millis().clamp(1, c_int::MAX as u128) as c_int,
        }
    }
}

/// An options field: `None` and `Some(Timeout::Default)` keep the library's default.
pub(crate) fn set_timeout(field: &mut c_int, value: Option<Timeout>) {
    match value {
        None | Some(Timeout::Default) => {}
        Some(t) => *field = t.as_ms(),
    }
}

/// A string for C; an interior NUL is `ELASTIC_EINVAL` naming `what`.
pub(crate) fn c_string(value: &str, what: &str) -> Result<CString> {
    CString::new(value).map_err(|_| Error::new(sys::ELASTIC_EINVAL, format!("{what} contains a NUL byte")))
}

pub(crate) fn opt_c_string(value: Option<&str>, what: &str) -> Result<Option<CString>> {
    value.map(|v| c_string(v, what)).transpose()
}

pub(crate) fn opt_ptr(value: &Option<CString>) -> *const c_char {
    value.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
}

/// Copies `len` bytes the library allocated and releases them.
///
/// # Safety
/// `data` is NULL or a library allocation of at least `len` bytes.
pub(crate) unsafe fn take_bytes(data: *mut c_void, len: usize) -> Vec<u8> {
    if data.is_null() {
        return Vec::new();
    }
    let bytes = std::slice::from_raw_parts(data as *const u8, len).to_vec();
    sys::elastic_free(data);
    bytes
}

/// Copies a library-allocated array of `n` strings (one allocation) and releases it.
///
/// # Safety
/// `list` is NULL or a library allocation holding `n` valid C strings.
pub(crate) unsafe fn take_strings(list: *mut *mut c_char, n: usize) -> Vec<String> {
    if list.is_null() {
        return Vec::new();
    }
    let strings = (0..n).map(|i| CStr::from_ptr(*list.add(i)).to_string_lossy().into_owned()).collect();
    sys::elastic_free(list as *mut c_void);
    strings
}

/// A fixed-size C char array (NUL-terminated within it) as a String.
pub(crate) fn array_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A zeroed C struct, the start of every options and output struct.
pub(crate) fn zeroed<T: Copy>() -> T {
    // SAFETY: only used for the ABI's plain C structs (integers, pointers,
    // arrays, Option<fn>), for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_follow_the_abi_rule() {
        assert_eq!(Timeout::Default.as_ms(), i32::MIN);
        assert_eq!(Timeout::NoLimit.as_ms(), -1);
        assert_eq!(Timeout::After(Duration::ZERO).as_ms(), 0);
        // Only zero means "do not wait": a sub-millisecond wait rounds up.
        assert_eq!(Timeout::After(Duration::from_micros(1)).as_ms(), 1);
        assert_eq!(Timeout::After(Duration::from_millis(1500)).as_ms(), 1500);
        assert_eq!(Timeout::After(Duration::from_secs(u64::MAX)).as_ms(), i32::MAX);
    }

    #[test]
    fn option_timeouts_keep_the_default_unless_set() {
        let mut field = 30000;
        set_timeout(&mut field, None);
        set_timeout(&mut field, Some(Timeout::Default));
        assert_eq!(field, 30000);
        set_timeout(&mut field, Some(Timeout::NoLimit));
        assert_eq!(field, -1);
    }

    #[test]
    fn c_arrays_become_strings_up_to_their_nul() {
        let chars: Vec<c_char> = b"node-1\0garbage".iter().map(|&b| b as c_char).collect();
        assert_eq!(array_string(&chars), "node-1");
        assert!(c_string("a\0b", "key").is_err());
    }
}
