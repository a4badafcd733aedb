//! Safe Rust API of libelastic, which keeps distributed training running
//! through failures.
//!
//! - [`StoreServer`] / [`Store`]: the job's key-value store;
//! - [`Rendezvous`]: nodes agree on each generation's members and ranks;
//! - [`Worker`]: the trainer's handle on its agent (heartbeats, abort hook,
//!   reconfiguration in the same process);
//! - [`Checkpoint`]: atomic, checksummed checkpoints of every rank.
//!
//! Every fallible call returns [`Result`] with one [`Error`] type (the
//! library's code, its name and the detail). Handles release themselves on
//! drop, and are `Send`/`Sync` exactly where `include/elastic/*.h` promises
//! thread safety. The raw declarations are in the `elastic-sys` crate.
//!
//! ```
//! use elastic::{Blob, Checkpoint, Store, StoreServer, Timeout};
//! let server = StoreServer::start(&Default::default())?;
//! let store = Store::connect(&server.endpoint()?, &Default::default())?;
//! store.set("greeting", b"hello")?;
//! assert_eq!(store.get("greeting", Timeout::Default)?, b"hello");
//!
//! let dir = std::env::temp_dir().join(format!("elastic-doc-crate-{}", std::process::id()));
//! let ckpt = Checkpoint::open(&dir, &Default::default())?;
//! ckpt.save(1, &[Blob::new("state", b"weights")])?;
//! assert_eq!(ckpt.latest()?, Some(1));
//! # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), elastic::Error>(())
//! ```
//!
//! # What the compiler refuses
//!
//! The C headers' rules on lifetimes and threads are types here, so breaking
//! them does not compile. A checkpoint cannot be closed (which would cancel
//! the save) while an asynchronous save's guard is alive:
//!
//! ```compile_fail,E0505
//! # let dir = std::env::temp_dir();
//! let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
//! let save = ckpt.save_async(1, &[elastic::Blob::new("w", b"1")], elastic::Timeout::NoLimit)?;
//! drop(ckpt);
//! save.wait(elastic::Timeout::NoLimit)?;
//! # Ok::<(), elastic::Error>(())
//! ```
//!
//! The worker's store is re-scoped at each reconfiguration, so it cannot be
//! held across [`Worker::poll`]:
//!
//! ```compile_fail,E0502
//! let mut worker = elastic::Worker::init(&Default::default())?;
//! let store = worker.store()?.unwrap();
//! worker.poll()?;
//! store.set("k", b"v")?;
//! # Ok::<(), elastic::Error>(())
//! ```
//!
//! The store a checkpoint commits through must outlive it:
//!
//! ```compile_fail,E0505
//! # let server = elastic::StoreServer::start(&Default::default())?;
//! let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
//! let mut options = elastic::CheckpointOptions::default();
//! options.store = Some(&store);
//! let ckpt = elastic::Checkpoint::open(std::env::temp_dir(), &options)?;
//! drop(store);
//! ckpt.latest()?;
//! # Ok::<(), elastic::Error>(())
//! ```
//!
//! A worker is used from one thread at a time (`Send`, not `Sync`):
//!
//! ```compile_fail,E0277
//! fn share<T: Sync>(_: &T) {}
//! let worker = elastic::Worker::init(&Default::default())?;
//! share(&worker);
//! # Ok::<(), elastic::Error>(())
//! ```
//!
//! The abort hook runs on the library's thread, so it must be `Send`:
//!
//! ```compile_fail,E0277
//! let mut worker = elastic::Worker::init(&Default::default())?;
//! let not_send = std::rc::Rc::new(0);
//! worker.on_abort(move |_, _| println!("{}", not_send))?;
//! # Ok::<(), elastic::Error>(())
//! ```
#![deny(missing_docs)]

mod ckpt;
mod error;
mod rdzv;
mod store;
mod train_loop;
mod util;
mod worker;

pub use ckpt::{restore, Blob, BlobWriter, Checkpoint, CheckpointOptions, Compression, PendingSave, Restore, Source, Transaction};
pub use error::{Error, Result};
pub use rdzv::{Cause, CauseKind, EtcdOptions, Generation, Rendezvous, RendezvousOptions};
pub use store::{Store, StoreOptions, StoreRef, StoreServer, StoreServerOptions};
pub use train_loop::{run_loop, LoopOptions, LoopResult, Trainer};
pub use util::Timeout;
pub use worker::{park, Poll, Worker, WorkerInfo, WorkerOptions};

use elastic_sys as sys;

/// The library's error codes (`ELASTIC_E*`), to compare with [`Error::code`].
///
/// ```
/// # let server = elastic::StoreServer::start(&Default::default())?;
/// # let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
/// match store.get("maybe", std::time::Duration::from_millis(1).into()) {
///     Err(e) if e.code == elastic::code::ETIMEDOUT => println!("not there yet"),
///     other => { other?; }
/// }
/// # Ok::<(), elastic::Error>(())
/// ```
pub mod code {
    use elastic_sys as sys;
    /// Invalid argument.
    pub const EINVAL: i32 = sys::ELASTIC_EINVAL;
    /// Out of memory.
    pub const ENOMEM: i32 = sys::ELASTIC_ENOMEM;
    /// Timed out.
    pub const ETIMEDOUT: i32 = sys::ELASTIC_ETIMEDOUT;
    /// Not found.
    pub const ENOTFOUND: i32 = sys::ELASTIC_ENOTFOUND;
    /// Closed.
    pub const ECLOSED: i32 = sys::ELASTIC_ECLOSED;
    /// Authentication failed.
    pub const EAUTH: i32 = sys::ELASTIC_EAUTH;
    /// Protocol error.
    pub const EPROTO: i32 = sys::ELASTIC_EPROTO;
    /// Input/output error.
    pub const EIO: i32 = sys::ELASTIC_EIO;
    /// Connection failed or lost.
    pub const ECONNECT: i32 = sys::ELASTIC_ECONNECT;
    /// Exceeds a configured limit.
    pub const ELIMIT: i32 = sys::ELASTIC_ELIMIT;
    /// Already exists.
    pub const EEXIST: i32 = sys::ELASTIC_EEXIST;
    /// No space left on device.
    pub const ENOSPC: i32 = sys::ELASTIC_ENOSPC;
    /// Permission denied.
    pub const EPERM: i32 = sys::ELASTIC_EPERM;
    /// Data is corrupt.
    pub const ECORRUPT: i32 = sys::ELASTIC_ECORRUPT;
    /// Busy.
    pub const EBUSY: i32 = sys::ELASTIC_EBUSY;
    /// Canceled.
    pub const ECANCELED: i32 = sys::ELASTIC_ECANCELED;
    /// The worker group changed; reconfigure.
    pub const ERECONFIGURE: i32 = sys::ELASTIC_ERECONFIGURE;
    /// Not supported.
    pub const EUNSUPPORTED: i32 = sys::ELASTIC_EUNSUPPORTED;
    /// Restart budget exhausted.
    pub const EBUDGET: i32 = sys::ELASTIC_EBUDGET;
    /// Operation not valid in the current state.
    pub const ESTATE: i32 = sys::ELASTIC_ESTATE;
    /// System call failed.
    pub const ESYS: i32 = sys::ELASTIC_ESYS;
    /// Value out of range.
    pub const ERANGE: i32 = sys::ELASTIC_ERANGE;
    /// Too few nodes joined before the timeout.
    pub const ENOTENOUGH: i32 = sys::ELASTIC_ENOTENOUGH;
    /// Read-only file system.
    pub const EROFS: i32 = sys::ELASTIC_EROFS;
    /// Replicas that must be equal differ (a checkpoint's replicated blobs).
    pub const EDIVERGED: i32 = sys::ELASTIC_EDIVERGED;
}

/// The version of the library actually loaded, as `"1.0.0"`.
///
/// ```
/// assert!(elastic::version().starts_with("1."));
/// ```
pub fn version() -> String {
    // SAFETY: returns a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(sys::elastic_version_string()) }.to_string_lossy().into_owned()
}

/// Whether an optional feature ("store", "auth", "zstd", "xxhash", "agent", "nccl",
/// "cuda") works in this build and on this machine.
///
/// ```
/// assert!(elastic::has_feature("store"));
/// ```
pub fn has_feature(name: &str) -> bool {
    match std::ffi::CString::new(name) {
        // SAFETY: a valid C string for the call.
        Ok(name) => unsafe { sys::elastic_has_feature(name.as_ptr()) == 1 },
        Err(_) => false,
    }
}
