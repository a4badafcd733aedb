//! The job's key-value store: [`StoreServer`] (hosts one) and [`Store`] (a
//! thread-safe client handle). Keys are strings, values byte strings.
use std::ffi::CString;
use std::marker::PhantomData;
use std::mem::{size_of, ManuallyDrop};
use std::ops::Deref;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};
use std::time::Duration;

use elastic_sys as sys;

use crate::error::{check, Error, Result};
use crate::util::{c_string, opt_c_string, opt_ptr, set_timeout, take_bytes, take_strings, zeroed, Timeout};

/// Options of [`StoreServer::start`]; `None` keeps the library's default.
///
/// ```
/// let mut options = elastic::StoreServerOptions::default();
/// options.host = Some("127.0.0.1".into());
/// options.port = Some(0); // any free port
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StoreServerOptions {
    /// Address to bind (default `"127.0.0.1"`; `"::"` or `"0.0.0.0"` for all).
    pub host: Option<String>,
    /// TCP port; 0 (the default) picks a free one.
    pub port: Option<u16>,
    /// Shared secret clients must present (default: from the environment, else none).
    pub token: Option<String>,
    /// Largest value accepted, in bytes (default 16 MiB).
    pub max_value_bytes: Option<usize>,
}

/// A store server running on the library's own thread; stopped and freed on
/// drop (its clients' pending calls then fail with `ECONNECT`).
///
/// Any thread may use it (`Send + Sync`), as `include/elastic/store.h` allows.
///
/// ```
/// let server = elastic::StoreServer::start(&Default::default())?;
/// let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
/// store.set("hello", b"world")?;
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Debug)]
pub struct StoreServer {
    raw: NonNull<sys::elastic_store_server>,
    host: String,
}

// SAFETY: store.h: "elastic_store_server calls may come from any thread";
// close (in Drop) is the last call, which &mut/ownership guarantees.
unsafe impl Send for StoreServer {}
unsafe impl Sync for StoreServer {}

impl StoreServer {
    /// Starts a server; returns once it listens.
    ///
    /// ```
    /// let mut options = elastic::StoreServerOptions::default();
    /// options.token = Some("s3cret".into());
    /// let server = elastic::StoreServer::start(&options)?;
    /// assert!(server.port()? > 0);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn start(options: &StoreServerOptions) -> Result<StoreServer> {
        let host = opt_c_string(options.host.as_deref(), "host")?;
        let token = opt_c_string(options.token.as_deref(), "token")?;
        let mut opts: sys::elastic_store_server_opts = zeroed();
        // SAFETY: opts is a valid elastic_store_server_opts of the size passed.
        check(unsafe { sys::elastic_store_server_opts_init(&mut opts, size_of::<sys::elastic_store_server_opts>()) })?;
        if host.is_some() {
            opts.host = opt_ptr(&host);
        }
        if let Some(port) = options.port {
            opts.port = i32::from(port);
        }
        if token.is_some() {
            opts.token = opt_ptr(&token);
        }
        if let Some(max) = options.max_value_bytes {
            opts.max_value_bytes = max;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: opts and the strings it points to live across the call.
        check(unsafe { sys::elastic_store_server_start(&opts, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "store server start returned NULL"))?;
        Ok(StoreServer { raw, host: options.host.clone().unwrap_or_else(|| "127.0.0.1".into()) })
    }

    /// The TCP port it listens on (the chosen one when the port was 0).
    ///
    /// ```
    /// let server = elastic::StoreServer::start(&Default::default())?;
    /// println!("listening on {}", server.port()?);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn port(&self) -> Result<u16> {
        let mut port = 0;
        // SAFETY: the handle is live; port is a valid out-pointer.
        check(unsafe { sys::elastic_store_server_get_port(self.raw.as_ptr(), &mut port) })?;
        u16::try_from(port).map_err(|_| Error::new(sys::ELASTIC_ERANGE, format!("port {port}")))
    }

    /// `"host:port"` for [`Store::connect`] (`"[host]:port"` for IPv6; a
    /// wildcard host is reached through the loopback address).
    ///
    /// ```
    /// let server = elastic::StoreServer::start(&Default::default())?;
    /// assert!(server.endpoint()?.starts_with("127.0.0.1:"));
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn endpoint(&self) -> Result<String> {
        let port = self.port()?;
        Ok(match self.host.as_str() {
            "0.0.0.0" => format!("127.0.0.1:{port}"),
            "::" => format!("[::1]:{port}"),
            host if host.contains(':') => format!("[{host}]:{port}"),
            host => format!("{host}:{port}"),
        })
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        // SAFETY: the handle is live and this is its last use.
        unsafe { sys::elastic_store_server_close(self.raw.as_ptr()) }
    }
}

/// Options of [`Store::connect`]; `None` keeps the library's default.
///
/// ```
/// use std::time::Duration;
/// let mut options = elastic::StoreOptions::default();
/// options.prefix = Some("job7/".into());
/// options.timeout = Some(Duration::from_secs(5).into());
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Prepended to every key (default `""`).
    pub prefix: Option<String>,
    /// The server's token (default: from the environment, else none).
    pub token: Option<String>,
    /// How long connection attempts are retried (default 10 s).
    pub connect_timeout: Option<Timeout>,
    /// Per-call deadline, and what [`Timeout::Default`] means for this handle
    /// (default 30 s); a zero duration is refused with `EINVAL`.
    pub timeout: Option<Timeout>,
}

/// A client handle on the job's store; closed on drop (pending calls fail
/// with `ECLOSED`).
///
/// One handle may be used from many threads at once (`Send + Sync`): calls
/// are multiplexed on one connection, as `include/elastic/store.h` promises.
///
/// ```
/// use elastic::{Store, StoreServer, Timeout};
/// let server = StoreServer::start(&Default::default())?;
/// let store = Store::connect(&server.endpoint()?, &Default::default())?;
/// store.set("answer", b"42")?;
/// assert_eq!(store.get("answer", Timeout::Default)?, b"42");
/// assert_eq!(store.add("counter", 5)?, 5);
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Debug)]
pub struct Store {
    raw: NonNull<sys::elastic_store>,
}

// SAFETY: store.h: "one elastic_store handle may be used from many threads at once".
unsafe impl Send for Store {}
unsafe impl Sync for Store {}

/// A store handle owned by someone else (the worker's generation-scoped
/// store): usable as a [`Store`] while the borrow lasts, never closed by Rust.
///
/// ```
/// let worker = elastic::Worker::init(&Default::default())?;
/// if let Some(store) = worker.store()? {
///     store.set("seen", b"1")?;
/// }
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Debug)]
pub struct StoreRef<'a> {
    store: ManuallyDrop<Store>,
    owner: PhantomData<&'a ()>,
}

impl<'a> StoreRef<'a> {
    /// # Safety
    /// `raw` stays valid for 'a and is released by its owner, not by Rust.
    pub(crate) unsafe fn borrowed(raw: NonNull<sys::elastic_store>) -> StoreRef<'a> {
        StoreRef { store: ManuallyDrop::new(Store { raw }), owner: PhantomData }
    }
}

impl Deref for StoreRef<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

impl Store {
    /// Connects to `"host:port"` (`"[::1]:port"` for IPv6).
    ///
    /// ```
    /// let server = elastic::StoreServer::start(&Default::default())?;
    /// let mut options = elastic::StoreOptions::default();
    /// options.prefix = Some("job/".into());
    /// let store = elastic::Store::connect(&server.endpoint()?, &options)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn connect(endpoint: &str, options: &StoreOptions) -> Result<Store> {
        let endpoint = c_string(endpoint, "endpoint")?;
        let prefix = opt_c_string(options.prefix.as_deref(), "prefix")?;
        let token = opt_c_string(options.token.as_deref(), "token")?;
        let mut opts: sys::elastic_store_opts = zeroed();
        // SAFETY: opts is a valid elastic_store_opts of the size passed.
        check(unsafe { sys::elastic_store_opts_init(&mut opts, size_of::<sys::elastic_store_opts>()) })?;
        if prefix.is_some() {
            opts.prefix = opt_ptr(&prefix);
        }
        if token.is_some() {
            opts.token = opt_ptr(&token);
        }
        set_timeout(&mut opts.connect_timeout_ms, options.connect_timeout);
        set_timeout(&mut opts.timeout_ms, options.timeout);
        let mut raw = ptr::null_mut();
        // SAFETY: the strings and opts live across the call.
        check(unsafe { sys::elastic_store_connect(endpoint.as_ptr(), &opts, &mut raw) })?;
        Ok(Store { raw: NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "connect returned NULL"))? })
    }

    fn raw(&self) -> *mut sys::elastic_store {
        self.raw.as_ptr()
    }

    /// The raw handle, for passing to other handles' options (not owned).
    pub(crate) fn as_raw(&self) -> *mut sys::elastic_store {
        self.raw()
    }

    /// A new handle on the same server with `prefix` appended to this one's.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// let scoped = store.scoped("gen3/")?;
    /// scoped.set("x", b"1")?;
    /// assert!(store.try_get("gen3/x")?.is_some());
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn scoped(&self, prefix: &str) -> Result<Store> {
        let prefix = c_string(prefix, "prefix")?;
        let mut raw = ptr::null_mut();
        // SAFETY: live handle, valid string, valid out-pointer.
        check(unsafe { sys::elastic_store_clone(self.raw(), prefix.as_ptr(), &mut raw) })?;
        Ok(Store { raw: NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "clone returned NULL"))? })
    }

    /// Sets a key.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("k", b"v")?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let key = c_string(key, "key")?;
        // SAFETY: live handle; key and value outlive the call.
        check(unsafe { sys::elastic_store_set(self.raw(), key.as_ptr(), value.as_ptr() as *const c_void, value.len()) })
    }

    /// Waits up to `timeout` for the key to exist and returns its value
    /// (`ETIMEDOUT` when it does not appear).
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// let missing = store.get("nobody", std::time::Duration::from_millis(10).into());
    /// assert_eq!(missing.unwrap_err().code, elastic::code::ETIMEDOUT);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn get(&self, key: &str, timeout: Timeout) -> Result<Vec<u8>> {
        let key = c_string(key, "key")?;
        let (mut value, mut len) = (ptr::null_mut(), 0);
        // SAFETY: live handle; valid out-pointers; the value is released by take_bytes.
        check(unsafe { sys::elastic_store_get(self.raw(), key.as_ptr(), timeout.as_ms(), &mut value, &mut len) })?;
        // SAFETY: the library returned `len` bytes at `value`.
        Ok(unsafe { take_bytes(value, len) })
    }

    /// The key's value now, or `None` when absent.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// assert_eq!(store.try_get("absent")?, None);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let key = c_string(key, "key")?;
        let (mut value, mut len) = (ptr::null_mut(), 0);
        // SAFETY: as in get.
        let rc = unsafe { sys::elastic_store_try_get(self.raw(), key.as_ptr(), &mut value, &mut len) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(None);
        }
        check(rc)?;
        // SAFETY: the library returned `len` bytes at `value`.
        Ok(Some(unsafe { take_bytes(value, len) }))
    }

    /// Atomically adds `delta` to the decimal integer at `key` (absent: 0)
    /// and returns the new value.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.add("n", 2)?;
    /// assert_eq!(store.add("n", -1)?, 1);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let key = c_string(key, "key")?;
        let mut result = 0;
        // SAFETY: live handle; valid key and out-pointer.
        check(unsafe { sys::elastic_store_add(self.raw(), key.as_ptr(), delta, &mut result) })?;
        Ok(result)
    }

    /// If the value equals `expected` (`None`: the key is absent), sets it to
    /// `desired`. Returns the value stored afterwards (`None` when absent), so
    /// the swap happened when it equals `desired`.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// assert_eq!(store.compare_set("leader", None, b"me")?, Some(b"me".to_vec()));
    /// assert_eq!(store.compare_set("leader", None, b"you")?, Some(b"me".to_vec()));
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn compare_set(&self, key: &str, expected: Option<&[u8]>, desired: &[u8]) -> Result<Option<Vec<u8>>> {
        let key = c_string(key, "key")?;
        let (e_ptr, e_len) = expected.map_or((ptr::null(), 0), |e| (e.as_ptr() as *const c_void, e.len()));
        let (mut current, mut len) = (ptr::null_mut(), 0);
        // SAFETY: live handle; all buffers outlive the call; current is released by take_bytes.
        check(unsafe {
            sys::elastic_store_compare_set(
                self.raw(),
                key.as_ptr(),
                e_ptr,
                e_len,
                desired.as_ptr() as *const c_void,
                desired.len(),
                &mut current,
                &mut len,
            )
        })?;
        // SAFETY: NULL (absent) or `len` library bytes.
        Ok(if current.is_null() { None } else { Some(unsafe { take_bytes(current, len) }) })
    }

    /// Waits until every key exists.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("a", b"")?;
    /// store.wait(&["a"], elastic::Timeout::Default)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn wait(&self, keys: &[&str], timeout: Timeout) -> Result<()> {
        let keys = keys.iter().map(|k| c_string(k, "key")).collect::<Result<Vec<CString>>>()?;
        let ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        // SAFETY: live handle; the key array and its strings outlive the call.
        check(unsafe { sys::elastic_store_wait(self.raw(), ptrs.as_ptr(), ptrs.len(), timeout.as_ms()) })
    }

    /// Deletes a key; `false` when it was absent.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("k", b"v")?;
    /// assert!(store.delete("k")?);
    /// assert!(!store.delete("k")?);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn delete(&self, key: &str) -> Result<bool> {
        let key = c_string(key, "key")?;
        // SAFETY: live handle; valid key.
        let rc = unsafe { sys::elastic_store_delete(self.raw(), key.as_ptr()) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(false);
        }
        check(rc).map(|()| true)
    }

    /// Number of keys under this handle's prefix.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("one", b"1")?;
    /// assert_eq!(store.num_keys()?, 1);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn num_keys(&self) -> Result<i64> {
        let mut count = 0;
        // SAFETY: live handle; valid out-pointer.
        check(unsafe { sys::elastic_store_num_keys(self.raw(), &mut count) })?;
        Ok(count)
    }

    /// Appends bytes to the value (creating it).
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.append("log", b"a")?;
    /// store.append("log", b"b")?;
    /// assert_eq!(store.try_get("log")?, Some(b"ab".to_vec()));
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn append(&self, key: &str, value: &[u8]) -> Result<()> {
        let key = c_string(key, "key")?;
        // SAFETY: live handle; key and value outlive the call.
        check(unsafe {
            sys::elastic_store_append(self.raw(), key.as_ptr(), value.as_ptr() as *const c_void, value.len())
        })
    }

    /// Gets several keys in one round trip, waiting up to `timeout` for all.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.multi_set(&[("x", b"1".as_slice()), ("y", b"2".as_slice())])?;
    /// let values = store.multi_get(&["x", "y"], elastic::Timeout::Default)?;
    /// assert_eq!(values, vec![b"1".to_vec(), b"2".to_vec()]);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn multi_get(&self, keys: &[&str], timeout: Timeout) -> Result<Vec<Vec<u8>>> {
        let keys = keys.iter().map(|k| c_string(k, "key")).collect::<Result<Vec<CString>>>()?;
        let ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        let mut values: Vec<*mut c_void> = vec![ptr::null_mut(); keys.len()];
        let mut lens = vec![0usize; keys.len()];
        // SAFETY: live handle; arrays of n elements outlive the call.
        let rc = unsafe {
            sys::elastic_store_multi_get(
                self.raw(),
                ptrs.as_ptr(),
                ptrs.len(),
                timeout.as_ms(),
                values.as_mut_ptr(),
                lens.as_mut_ptr(),
            )
        };
        let error = check(rc).err();
        // SAFETY: each entry is NULL or a library allocation of lens[i] bytes (freed either way).
        let out: Vec<Vec<u8>> = values.iter().zip(&lens).map(|(&v, &n)| unsafe { take_bytes(v, n) }).collect();
        match error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Sets several keys in one round trip, atomically for other clients.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.multi_set(&[("a", b"1".as_slice()), ("b", b"".as_slice())])?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn multi_set(&self, entries: &[(&str, &[u8])]) -> Result<()> {
        let keys = entries.iter().map(|(k, _)| c_string(k, "key")).collect::<Result<Vec<CString>>>()?;
        let key_ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        let value_ptrs: Vec<*const c_void> = entries.iter().map(|(_, v)| v.as_ptr() as *const c_void).collect();
        let lens: Vec<usize> = entries.iter().map(|(_, v)| v.len()).collect();
        // SAFETY: live handle; three arrays of n elements outlive the call.
        check(unsafe {
            sys::elastic_store_multi_set(self.raw(), key_ptrs.as_ptr(), value_ptrs.as_ptr(), lens.as_ptr(), lens.len())
        })
    }

    /// Up to `max` keys under this handle's prefix + `prefix`, relative to
    /// the handle's prefix.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("node/a", b"")?;
    /// assert_eq!(store.keys("node/", 10)?, vec!["node/a".to_string()]);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn keys(&self, prefix: &str, max: usize) -> Result<Vec<String>> {
        let prefix = c_string(prefix, "prefix")?;
        let (mut keys, mut n) = (ptr::null_mut(), 0);
        // SAFETY: live handle; valid out-pointers; the list is released by take_strings.
        check(unsafe { sys::elastic_store_keys(self.raw(), prefix.as_ptr(), max, &mut keys, &mut n) })?;
        // SAFETY: the library returned n strings in one allocation.
        Ok(unsafe { take_strings(keys, n) })
    }

    /// A key's value and the revision of its last change, or `None` when absent.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("k", b"v")?;
    /// let (value, revision) = store.get_revision("k")?.unwrap();
    /// assert!(value == b"v" && revision > 0);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn get_revision(&self, key: &str) -> Result<Option<(Vec<u8>, u64)>> {
        let key = c_string(key, "key")?;
        let (mut value, mut len, mut revision) = (ptr::null_mut(), 0, 0);
        // SAFETY: live handle; valid out-pointers.
        let rc = unsafe { sys::elastic_store_get_revision(self.raw(), key.as_ptr(), &mut value, &mut len, &mut revision) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(None);
        }
        check(rc)?;
        // SAFETY: `len` library bytes at `value`.
        Ok(Some((unsafe { take_bytes(value, len) }, revision)))
    }

    /// Waits until a key starting with `prefix` changes at a revision after
    /// `after_revision`; returns the store's revision then (`ETIMEDOUT` when
    /// nothing changed in time).
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// store.set("cfg/a", b"1")?;
    /// let revision = store.watch("cfg/", 0, elastic::Timeout::Default)?;
    /// assert!(revision >= 1);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn watch(&self, prefix: &str, after_revision: u64, timeout: Timeout) -> Result<u64> {
        let prefix = c_string(prefix, "prefix")?;
        let mut revision = 0;
        // SAFETY: live handle; valid string and out-pointer.
        check(unsafe {
            sys::elastic_store_watch(self.raw(), prefix.as_ptr(), after_revision, timeout.as_ms(), &mut revision)
        })?;
        Ok(revision)
    }

    /// Grants a lease that lives while this connection is open and
    /// keep-alives arrive within `ttl`; with `keepalive` set the library's
    /// own thread sends them. Keys set with [`Store::set_leased`] die with it.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// use std::time::Duration;
    /// let lease = store.lease_grant(Duration::from_secs(5), Some(Duration::from_secs(1)))?;
    /// store.set_leased("alive/me", b"1", lease)?;
    /// store.lease_keepalive(lease)?;
    /// store.lease_revoke(lease)?;
    /// assert_eq!(store.try_get("alive/me")?, None);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn lease_grant(&self, ttl: Duration, keepalive: Option<Duration>) -> Result<u64> {
        let ms = |d: Duration| d.as_millis().min(i32::MAX as u128) as i32;
        let mut lease = 0;
        // SAFETY: live handle; valid out-pointer.
        check(unsafe { sys::elastic_store_lease_grant(self.raw(), ms(ttl), keepalive.map_or(0, ms), &mut lease) })?;
        Ok(lease)
    }

    /// Sends one keep-alive for the lease now (`ENOTFOUND` when it ended).
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// let lease = store.lease_grant(std::time::Duration::from_secs(5), None)?;
    /// store.lease_keepalive(lease)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn lease_keepalive(&self, lease: u64) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::elastic_store_lease_keepalive(self.raw(), lease) })
    }

    /// Ends the lease now, deleting its keys.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// let lease = store.lease_grant(std::time::Duration::from_secs(5), None)?;
    /// store.lease_revoke(lease)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn lease_revoke(&self, lease: u64) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::elastic_store_lease_revoke(self.raw(), lease) })
    }

    /// Sets a key attached to a lease (`ENOTFOUND` if the lease ended).
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// let lease = store.lease_grant(std::time::Duration::from_secs(5), None)?;
    /// store.set_leased("member/1", b"up", lease)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn set_leased(&self, key: &str, value: &[u8], lease: u64) -> Result<()> {
        let key = c_string(key, "key")?;
        // SAFETY: live handle; key and value outlive the call.
        check(unsafe {
            sys::elastic_store_set_leased(self.raw(), key.as_ptr(), value.as_ptr() as *const c_void, value.len(), lease)
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: the handle is owned (StoreRef never drops its Store) and this is its last use.
        unsafe { sys::elastic_store_close(self.raw.as_ptr()) }
    }
}
