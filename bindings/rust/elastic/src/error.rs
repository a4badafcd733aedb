//! The one error type: a libelastic error code, its name and the detail the
//! library recorded for the failing call.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use elastic_sys as sys;

/// A failed call: the library's `ELASTIC_E*` code, its name and the detail
/// of the failure ("connect 127.0.0.1:1: connection refused").
///
/// ```
/// use elastic::{code, Store, StoreOptions};
/// // Nothing listens on port 1: connecting fails with ELASTIC_ECONNECT.
/// let mut options = StoreOptions::default();
/// options.connect_timeout = Some(elastic::Timeout::After(std::time::Duration::ZERO));
/// let error = Store::connect("127.0.0.1:1", &options).unwrap_err();
/// assert_eq!(error.code, code::ECONNECT);
/// assert_eq!(error.name, "ELASTIC_ECONNECT");
/// println!("{error}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The negative `ELASTIC_E*` code (see [`code`](crate::code)).
    pub code: i32,
    /// The code's name, e.g. `"ELASTIC_ETIMEDOUT"`.
    pub name: &'static str,
    /// What failed and why, from `elastic_last_error()` (may be empty).
    pub detail: String,
}

/// `Result` with [`Error`].
///
/// ```
/// fn port(server: &elastic::StoreServer) -> elastic::Result<u16> {
///     server.port()
/// }
/// ```
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with this code and detail (the name comes from the library).
    ///
    /// ```
    /// let error = elastic::Error::new(elastic::code::EINVAL, "key contains a NUL byte");
    /// assert_eq!(error.name, "ELASTIC_EINVAL");
    /// ```
    pub fn new(code: i32, detail: impl Into<String>) -> Error {
        Error { code, name: name_of(code), detail: detail.into() }
    }

    /// The library's sentence for the code ("timed out").
    ///
    /// ```
    /// let error = elastic::Error::new(elastic::code::ETIMEDOUT, "");
    /// assert_eq!(error.description(), "timed out");
    /// ```
    pub fn description(&self) -> &'static str {
        // SAFETY: elastic_strerror returns a static, NUL-terminated string for any code.
        static_str(unsafe { sys::elastic_strerror(self.code) })
    }

    /// The error of the call that just returned `code` on this thread.
    pub(crate) fn last(code: c_int) -> Error {
        // SAFETY: the detail is valid until this thread's next library call; it is copied now.
        let detail = unsafe { CStr::from_ptr(sys::elastic_last_error()) }.to_string_lossy().into_owned();
        Error::new(code, detail)
    }
}

fn name_of(code: i32) -> &'static str {
    // SAFETY: elastic_err_name returns a static, NUL-terminated string for any code.
    static_str(unsafe { sys::elastic_err_name(code) })
}

/// A string the library keeps for as long as it is loaded (it is never unloaded).
fn static_str(ptr: *const std::os::raw::c_char) -> &'static str {
    // SAFETY: callers pass the library's static strings, which are never NULL.
    unsafe { CStr::from_ptr(ptr) }.to_str().unwrap_or("?")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}: {}", self.name, self.description())
        } else {
            write!(f, "{}: {}", self.name, self.detail)
        }
    }
}

impl std::error::Error for Error {}

/// 0 is success; anything else is the calling thread's last error.
pub(crate) fn check(rc: c_int) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::last(rc))
    }
}
