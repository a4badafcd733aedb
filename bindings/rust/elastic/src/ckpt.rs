//! The atomic checkpoint store: named blobs committed together for a step,
//! checksummed, never seen half written ([`Checkpoint`]).
use std::ffi::CString;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::{Mutex, MutexGuard};

use elastic_sys as sys;

use crate::error::{check, Error, Result};
use crate::store::Store;
use crate::util::{c_string, set_timeout, take_bytes, take_strings, zeroed, Timeout};

/// How blobs are stored.
///
/// ```
/// let mut options = elastic::CheckpointOptions::default();
/// options.compression = Some(elastic::Compression::None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// As they are.
    None,
    /// zstd per chunk (the default); chunks that do not shrink stay raw.
    Zstd,
}

/// Options of [`Checkpoint::open`]; `None` keeps the library's default.
/// `'s` is the borrow of the store the global commit goes through, if any.
///
/// ```
/// let mut options = elastic::CheckpointOptions::default();
/// options.rank = Some(0);
/// options.world = Some(1);
/// options.keep_last = Some(3);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CheckpointOptions<'s> {
    /// zstd (default) or none.
    pub compression: Option<Compression>,
    /// zstd level (default 1).
    pub zstd_level: Option<i32>,
    /// Compression/verification threads (default: online CPUs, at most 8; 0 or 1: the caller's).
    pub threads: Option<i32>,
    /// Whether files and directories are fsynced (default true: survives power loss).
    pub fsync: Option<bool>,
    /// Keep the newest N committed steps (default: all).
    pub keep_last: Option<u32>,
    /// Also keep every step divisible by this (default: none).
    pub keep_every: Option<u64>,
    /// This process's rank in the generation (default 0).
    pub rank: Option<u32>,
    /// Ranks in the generation (default 1).
    pub world: Option<u32>,
    /// The generation writing (default 0).
    pub generation: Option<u64>,
    /// The store the global commit record goes through (default: a file in the directory).
    pub store: Option<&'s Store>,
    /// With a store: how long commit waits for the other ranks (default 10 min;
    /// [`Timeout::Default`]: the store handle's per-call timeout).
    pub commit_timeout: Option<Timeout>,
}

/// One blob of [`Checkpoint::save`] / [`Checkpoint::save_async`].
///
/// ```
/// let weights = vec![0u8; 1024];
/// let blob = elastic::Blob::new("weights", &weights).replicated();
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Blob<'a> {
    name: &'a str,
    data: &'a [u8],
    flags: u32,
}

impl<'a> Blob<'a> {
    /// This rank's blob `name` (1..1024 bytes, unique in the shard).
    ///
    /// ```
    /// let blob = elastic::Blob::new("optimizer/rank0", b"state");
    /// ```
    pub fn new(name: &'a str, data: &'a [u8]) -> Blob<'a> {
        Blob { name, data, flags: 0 }
    }

    /// Marks it identical on every rank: any rank (any world size) may read it.
    ///
    /// ```
    /// let blob = elastic::Blob::new("config", b"{}").replicated();
    /// ```
    pub fn replicated(mut self) -> Blob<'a> {
        self.flags |= sys::ELASTIC_CKPT_REPLICATED;
        self
    }
}

/// The C array of a blob list, with the names it points to.
pub(crate) struct RawBlobs {
    _names: Vec<CString>,
    pub(crate) blobs: Vec<sys::elastic_ckpt_blob>,
}

pub(crate) fn raw_blobs(blobs: &[Blob<'_>]) -> Result<RawBlobs> {
    let names = blobs.iter().map(|b| c_string(b.name, "blob name")).collect::<Result<Vec<CString>>>()?;
    let raw = blobs
        .iter()
        .zip(&names)
        .map(|(b, name)| sys::elastic_ckpt_blob {
            name: name.as_ptr(),
            data: b.data.as_ptr() as *const c_void,
            len: b.data.len(),
            flags: b.flags,
        })
        .collect();
    Ok(RawBlobs { _names: names, blobs: raw })
}

/// A checkpoint directory; closed on drop (a save still running is then
/// canceled: [`PendingSave::wait`] first to keep it).
///
/// `Send + Sync`: ckpt.h promises that calls on one handle are serialised
/// inside, but libelastic 1.0.0's reads share a step cache without a lock
/// (concurrent reads free each other's view: heap-use-after-free under ASan),
/// so this handle serialises its own calls with a mutex.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("elastic-doc-ckpt-{}", std::process::id()));
/// let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
/// ckpt.save(10, &[elastic::Blob::new("state", b"hello")])?;
/// let step = ckpt.latest()?.unwrap();
/// assert_eq!(ckpt.read(step, "state")?, b"hello");
/// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Debug)]
pub struct Checkpoint<'s> {
    raw: NonNull<sys::elastic_ckpt>,
    calls: Mutex<()>,
    store: PhantomData<&'s Store>,
}

// SAFETY: every call on the handle holds `calls` (see above); close (in Drop)
// is the last call.
unsafe impl Send for Checkpoint<'_> {}
unsafe impl Sync for Checkpoint<'_> {}

impl<'s> Checkpoint<'s> {
    /// Opens (creating it if missing, not its parents) a checkpoint directory.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("elastic-doc-open-{}", std::process::id()));
    /// let mut options = elastic::CheckpointOptions::default();
    /// options.compression = Some(elastic::Compression::None);
    /// options.keep_last = Some(2);
    /// let ckpt = elastic::Checkpoint::open(&dir, &options)?;
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn open(dir: impl AsRef<Path>, options: &CheckpointOptions<'s>) -> Result<Checkpoint<'s>> {
        let dir = dir.as_ref();
        let dir = c_string(dir.to_str().ok_or_else(|| Error::new(sys::ELASTIC_EINVAL, "directory is not UTF-8"))?, "directory")?;
        let opts = raw_options(options)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid string and options (the store outlives 's, which the handle carries).
        check(unsafe { sys::elastic_ckpt_open(dir.as_ptr(), &opts, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "ckpt open returned NULL"))?;
        Ok(Checkpoint { raw, calls: Mutex::new(()), store: PhantomData })
    }

    /// This node's memory tier (elasticrun `--memory-ckpt`: shared memory the
    /// node's agent holds, in the disk format): saves go to memory and outlive
    /// the worker; reads work as on a directory. `None` outside a memory tier.
    /// Give it the worker's store (each node holds only its own ranks' shards).
    pub fn open_memory(options: &CheckpointOptions<'s>) -> Result<Option<Checkpoint<'s>>> {
        let opts = raw_options(options)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid options (the store outlives 's, which the handle carries).
        let rc = unsafe { sys::elastic_ckpt_open_memory(&opts, &mut raw) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(None);
        }
        check(rc)?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "ckpt open returned NULL"))?;
        Ok(Some(Checkpoint { raw, calls: Mutex::new(()), store: PhantomData }))
    }

    fn raw(&self) -> *mut sys::elastic_ckpt {
        self.raw.as_ptr()
    }

    /// Held across every call on the handle.
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes and commits the blobs as `step` (this rank's shard).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-save-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(1, &[elastic::Blob::new("a", b"1"), elastic::Blob::new("b", b"2")])?;
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn save(&self, step: u64, blobs: &[Blob<'_>]) -> Result<()> {
        let _calls = self.lock();
        let raw = raw_blobs(blobs)?;
        // SAFETY: live handle; the blob array and the buffers it points to outlive the call.
        check(unsafe { sys::elastic_ckpt_save(self.raw(), step, raw.blobs.as_ptr(), raw.blobs.len()) })
    }

    /// Starts saving `step` in the background and returns: the library copies
    /// the blobs before this returns (that copy is the whole training stall),
    /// so the buffers are borrowed only for the call. The returned guard
    /// holds the checkpoint exclusively (reads go through
    /// [`PendingSave::checkpoint`]) until the save's outcome is taken with
    /// [`PendingSave::wait`], so no other save or close can overtake it.
    /// If an earlier save is still running, waits up to `timeout` for it, else `EBUSY`.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-async-{}", std::process::id()));
    /// # let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let mut weights = vec![1u8; 4096];
    /// let save = ckpt.save_async(5, &[elastic::Blob::new("w", &weights)], elastic::Timeout::NoLimit)?;
    /// weights[0] = 2; // the library already copied them
    /// assert_eq!(save.wait(elastic::Timeout::NoLimit)?, 5);
    /// assert_eq!(ckpt.read(5, "w")?[0], 1);
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn save_async(&mut self, step: u64, blobs: &[Blob<'_>], timeout: Timeout) -> Result<PendingSave<'_, 's>> {
        // &mut self: no other call can run on the handle meanwhile.
        let raw = raw_blobs(blobs)?;
        // SAFETY: live handle; the library copies every blob before returning
        // (ckpt.h: "Copies the blobs and returns"), so they only need to outlive the call.
        check(unsafe {
            sys::elastic_ckpt_save_async(self.raw(), step, raw.blobs.as_ptr(), raw.blobs.len(), timeout.as_ms())
        })?;
        Ok(PendingSave { ckpt: self, step })
    }

    /// Starts this rank's shard of `step` for blob-by-blob writing; one at a
    /// time per handle (`EBUSY` otherwise). Dropped without
    /// [`commit`](Transaction::commit), it is aborted.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-txn-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let mut txn = ckpt.begin(3)?;
    /// txn.put("a", b"1")?;
    /// txn.put_replicated("config", b"{}")?;
    /// txn.commit()?;
    /// assert_eq!(ckpt.latest()?, Some(3));
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn begin(&self, step: u64) -> Result<Transaction<'_>> {
        let _calls = self.lock();
        let mut raw = ptr::null_mut();
        // SAFETY: live handle; valid out-pointer.
        check(unsafe { sys::elastic_ckpt_begin(self.raw(), step, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "ckpt begin returned NULL"))?;
        Ok(Transaction { raw, ckpt: PhantomData })
    }

    /// The newest step that is committed and verifies, or `None`.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-latest-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// assert_eq!(ckpt.latest()?, None); // a fresh directory
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn latest(&self) -> Result<Option<u64>> {
        let _calls = self.lock();
        let mut step = 0;
        // SAFETY: live handle; valid out-pointer.
        let rc = unsafe { sys::elastic_ckpt_latest(self.raw(), &mut step) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(None);
        }
        check(rc).map(|()| Some(step))
    }

    /// Reads a blob of a committed step (this rank's shard first, then a
    /// replicated blob); every byte is verified (`ECORRUPT`).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-read-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(2, &[elastic::Blob::new("x", b"xyz")])?;
    /// assert_eq!(ckpt.read(2, "x")?, b"xyz");
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn read(&self, step: u64, name: &str) -> Result<Vec<u8>> {
        self.read_shard(step, sys::ELASTIC_CKPT_ANY_RANK, name)
    }

    /// Reads a blob into `buf`; returns its length (`ELIMIT` when `buf` is too small).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-into-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(2, &[elastic::Blob::new("x", b"xyz")])?;
    /// let mut buf = [0u8; 8];
    /// assert_eq!(ckpt.read_into(2, "x", &mut buf)?, 3);
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn read_into(&self, step: u64, name: &str, buf: &mut [u8]) -> Result<usize> {
        let _calls = self.lock();
        let name = c_string(name, "blob name")?;
        let mut len = 0;
        // SAFETY: live handle; buf is writable for buf.len() bytes.
        check(unsafe {
            sys::elastic_ckpt_read_into(self.raw(), step, name.as_ptr(), buf.as_mut_ptr() as *mut c_void, buf.len(), &mut len)
        })?;
        Ok(len)
    }

    /// A blob of the shard `rank` wrote (-1: as [`read`](Checkpoint::read)),
    /// for resharding after the world size changed.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-shard-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(2, &[elastic::Blob::new("x", b"rank 0's")])?;
    /// assert_eq!(ckpt.read_shard(2, 0, "x")?, b"rank 0's");
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn read_shard(&self, step: u64, rank: i32, name: &str) -> Result<Vec<u8>> {
        let _calls = self.lock();
        let name = c_string(name, "blob name")?;
        let (mut data, mut len) = (ptr::null_mut(), 0);
        // SAFETY: live handle; valid out-pointers; data is released by take_bytes.
        check(unsafe { sys::elastic_ckpt_read_shard(self.raw(), step, rank, name.as_ptr(), &mut data, &mut len) })?;
        // SAFETY: `len` library bytes at `data`.
        Ok(unsafe { take_bytes(data, len) })
    }

    /// Committed, verifying steps, oldest first.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-steps-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(1, &[elastic::Blob::new("x", b"")])?;
    /// ckpt.save(2, &[elastic::Blob::new("x", b"")])?;
    /// assert_eq!(ckpt.steps()?, vec![1, 2]);
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn steps(&self) -> Result<Vec<u64>> {
        let _calls = self.lock();
        let (mut steps, mut n) = (ptr::null_mut(), 0);
        // SAFETY: live handle; valid out-pointers.
        check(unsafe { sys::elastic_ckpt_list_steps(self.raw(), &mut steps, &mut n) })?;
        if steps.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: n u64 values in one library allocation, released here.
        let list = unsafe { std::slice::from_raw_parts(steps, n) }.to_vec();
        unsafe { sys::elastic_free(steps as *mut c_void) };
        Ok(list)
    }

    /// Blob names of a step in `rank`'s shard (-1: every name read can find).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-blobs-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(1, &[elastic::Blob::new("w", b"")])?;
    /// assert_eq!(ckpt.blob_names(1, -1)?, vec!["w".to_string()]);
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn blob_names(&self, step: u64, rank: i32) -> Result<Vec<String>> {
        let _calls = self.lock();
        let (mut names, mut n) = (ptr::null_mut(), 0);
        // SAFETY: live handle; valid out-pointers; the list is released by take_strings.
        check(unsafe { sys::elastic_ckpt_list_blobs(self.raw(), step, rank, &mut names, &mut n) })?;
        // SAFETY: n strings in one library allocation.
        Ok(unsafe { take_strings(names, n) })
    }

    /// The world size and generation that wrote a committed step.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-info-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// ckpt.save(1, &[elastic::Blob::new("w", b"")])?;
    /// assert_eq!(ckpt.step_info(1)?, (1, 0));
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn step_info(&self, step: u64) -> Result<(u32, u64)> {
        let _calls = self.lock();
        let (mut world, mut generation) = (0, 0);
        // SAFETY: live handle; valid out-pointers.
        check(unsafe { sys::elastic_ckpt_step_info(self.raw(), step, &mut world, &mut generation) })?;
        Ok((world, generation))
    }
}

impl Checkpoint<'static> {
    /// A view of a handle the loop owns (`elastic_loop_run`'s tiers): never
    /// closed here; the loop keeps it open for the callback that sees it.
    pub(crate) fn borrowed(raw: NonNull<sys::elastic_ckpt>) -> std::mem::ManuallyDrop<Checkpoint<'static>> {
        std::mem::ManuallyDrop::new(Checkpoint { raw, calls: Mutex::new(()), store: PhantomData })
    }
}

impl Drop for Checkpoint<'_> {
    fn drop(&mut self) {
        // SAFETY: last call on the handle (no Transaction or PendingSave
        // borrows it any more).
        unsafe { sys::elastic_ckpt_close(self.raw.as_ptr()) }
    }
}

/// An asynchronous save in flight ([`Checkpoint::save_async`]): it borrows
/// the checkpoint exclusively, so the handle cannot be closed (which would
/// cancel the save) nor start another save before [`wait`](PendingSave::wait)
/// took this one's outcome. Dropping it without waiting lets the save go on;
/// a later `save_async` waits for it and its outcome is lost.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("elastic-doc-pending-{}", std::process::id()));
/// # let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
/// let save = ckpt.save_async(7, &[elastic::Blob::new("w", b"data")], elastic::Timeout::NoLimit)?;
/// assert_eq!(save.step(), 7);
/// save.wait(elastic::Timeout::NoLimit)?;
/// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), elastic::Error>(())
/// ```
#[must_use = "wait() for the outcome of the save"]
#[derive(Debug)]
pub struct PendingSave<'c, 's> {
    ckpt: &'c mut Checkpoint<'s>,
    step: u64,
}

impl<'c, 's> PendingSave<'c, 's> {
    /// The step being saved.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-step-{}", std::process::id()));
    /// # let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let save = ckpt.save_async(9, &[elastic::Blob::new("w", b"")], elastic::Timeout::NoLimit)?;
    /// assert_eq!(save.step(), 9);
    /// # save.wait(elastic::Timeout::NoLimit)?; drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The checkpoint, for reads while the save runs.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-ckref-{}", std::process::id()));
    /// # let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let save = ckpt.save_async(3, &[elastic::Blob::new("w", b"1")], elastic::Timeout::NoLimit)?;
    /// let _newest_before = save.checkpoint().latest()?;
    /// save.wait(elastic::Timeout::NoLimit)?;
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn checkpoint(&self) -> &Checkpoint<'s> {
        self.ckpt
    }

    /// Whether the save finished: `Some(step)` once it was written and
    /// committed, `None` while it runs, the save's own error if it failed.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-poll-{}", std::process::id()));
    /// # let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let save = ckpt.save_async(6, &[elastic::Blob::new("w", b"1")], elastic::Timeout::NoLimit)?;
    /// while save.poll()?.is_none() {
    ///     std::thread::yield_now(); // train on
    /// }
    /// # drop(save); drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn poll(&self) -> Result<Option<u64>> {
        match self.outcome(Timeout::After(std::time::Duration::ZERO)) {
            Err(e) if e.code == sys::ELASTIC_ETIMEDOUT => Ok(None),
            other => other.map(Some),
        }
    }

    fn outcome(&self, timeout: Timeout) -> Result<u64> {
        let _calls = self.ckpt.lock();
        let mut step = 0;
        // SAFETY: live handle (borrowed); valid out-pointer.
        check(unsafe { sys::elastic_ckpt_async_wait(self.ckpt.raw(), timeout.as_ms(), &mut step) })?;
        if step != self.step {
            return Err(Error::new(sys::ELASTIC_ESTATE, format!("waited for step {}, the last save was {step}", self.step)));
        }
        Ok(step)
    }

    /// Waits up to `timeout` for the save to be written and committed and
    /// returns its step; the save's own error if it failed; `ETIMEDOUT` if
    /// it still runs (the save goes on; [`poll`](PendingSave::poll) to keep the guard).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-wait-{}", std::process::id()));
    /// # let mut ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let save = ckpt.save_async(4, &[elastic::Blob::new("w", b"1")], elastic::Timeout::NoLimit)?;
    /// assert_eq!(save.wait(elastic::Timeout::NoLimit)?, 4);
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn wait(self, timeout: Timeout) -> Result<u64> {
        self.outcome(timeout)
    }
}

/// This rank's shard of one step, written blob by blob
/// ([`Checkpoint::begin`]); aborted on drop unless committed. It belongs to
/// one thread at a time (`Send`, not `Sync`).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("elastic-doc-tx-{}", std::process::id()));
/// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
/// let mut txn = ckpt.begin(1)?;
/// txn.put("a", b"1")?;
/// drop(txn); // aborted: nothing of it remains
/// assert_eq!(ckpt.latest()?, None);
/// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Debug)]
pub struct Transaction<'c> {
    raw: NonNull<sys::elastic_ckpt_txn>,
    ckpt: PhantomData<&'c ()>,
}

// SAFETY: ckpt.h: "a transaction and a writer belong to the thread that uses
// them (one at a time)": it may move, not be shared.
unsafe impl Send for Transaction<'_> {}

impl<'c> Transaction<'c> {
    /// Adds a blob; the data is consumed before the call returns.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-put-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let mut txn = ckpt.begin(1)?;
    /// txn.put("weights", &[0u8; 64])?;
    /// txn.commit()?;
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn put(&mut self, name: &str, data: &[u8]) -> Result<()> {
        self.put_flags(name, data, 0)
    }

    /// Adds a blob identical on every rank (with shared storage only rank 0 writes it).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-rep-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let mut txn = ckpt.begin(1)?;
    /// txn.put_replicated("config", b"{}")?;
    /// txn.commit()?;
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn put_replicated(&mut self, name: &str, data: &[u8]) -> Result<()> {
        self.put_flags(name, data, sys::ELASTIC_CKPT_REPLICATED)
    }

    fn put_flags(&mut self, name: &str, data: &[u8], flags: u32) -> Result<()> {
        let name = c_string(name, "blob name")?;
        // SAFETY: live transaction; name and data outlive the call.
        check(unsafe {
            sys::elastic_ckpt_put_flags(self.raw.as_ptr(), name.as_ptr(), data.as_ptr() as *const c_void, data.len(), flags)
        })
    }

    /// Opens a blob written piece by piece; it borrows the transaction, so
    /// it is finished ([`BlobWriter::finish`] or drop) before the next put or commit.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-writer-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let mut txn = ckpt.begin(1)?;
    /// let mut writer = txn.writer("big", false)?;
    /// writer.write(b"part 1, ")?;
    /// writer.write(b"part 2")?;
    /// writer.finish()?;
    /// txn.commit()?;
    /// assert_eq!(ckpt.read(1, "big")?, b"part 1, part 2");
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn writer(&mut self, name: &str, replicated: bool) -> Result<BlobWriter<'_>> {
        let name = c_string(name, "blob name")?;
        let flags = if replicated { sys::ELASTIC_CKPT_REPLICATED } else { 0 };
        let mut raw = ptr::null_mut();
        // SAFETY: live transaction; valid string and out-pointer.
        check(unsafe { sys::elastic_ckpt_writer_open(self.raw.as_ptr(), name.as_ptr(), flags, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "writer open returned NULL"))?;
        Ok(BlobWriter { raw: Some(raw), txn: PhantomData })
    }

    /// Makes the shard durable and commits it, then takes part in the global
    /// commit. On failure nothing of the transaction remains.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-commit-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// let mut txn = ckpt.begin(8)?;
    /// txn.put("a", b"1")?;
    /// txn.commit()?;
    /// assert_eq!(ckpt.latest()?, Some(8));
    /// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn commit(self) -> Result<()> {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        // SAFETY: commit consumes (frees) the transaction whatever the outcome;
        // forget keeps Drop from aborting it again.
        check(unsafe { sys::elastic_ckpt_commit(raw) })
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        // SAFETY: an uncommitted transaction: abort drops it and its files.
        unsafe { sys::elastic_ckpt_abort(self.raw.as_ptr()) }
    }
}

/// A blob of a [`Transaction`] written piece by piece; finished on drop
/// (errors then are lost: call [`finish`](BlobWriter::finish) to see them).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("elastic-doc-bw-{}", std::process::id()));
/// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
/// let mut txn = ckpt.begin(1)?;
/// {
///     let mut writer = txn.writer("log", false)?;
///     writer.write(b"streamed")?;
/// } // finished here
/// txn.commit()?;
/// # drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Debug)]
pub struct BlobWriter<'t> {
    raw: Option<NonNull<sys::elastic_ckpt_writer>>,
    txn: PhantomData<&'t mut ()>,
}

// SAFETY: as Transaction: it may move between threads, not be shared.
unsafe impl Send for BlobWriter<'_> {}

impl BlobWriter<'_> {
    /// Appends bytes to the blob.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-bww-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// # let mut txn = ckpt.begin(1)?;
    /// let mut writer = txn.writer("w", false)?;
    /// for chunk in [[1u8; 16], [2u8; 16]] {
    ///     writer.write(&chunk)?;
    /// }
    /// writer.finish()?;
    /// # drop(txn); drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        let raw = self.raw.expect("a BlobWriter is live until finish");
        // SAFETY: live writer; data outlives the call.
        check(unsafe { sys::elastic_ckpt_writer_write(raw.as_ptr(), data.as_ptr() as *const c_void, data.len()) })
    }

    /// Finishes the blob and frees the writer.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("elastic-doc-bwf-{}", std::process::id()));
    /// # let ckpt = elastic::Checkpoint::open(&dir, &Default::default())?;
    /// # let mut txn = ckpt.begin(1)?;
    /// let writer = txn.writer("empty", false)?;
    /// writer.finish()?;
    /// # drop(txn); drop(ckpt); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn finish(mut self) -> Result<()> {
        let raw = self.raw.take().expect("a BlobWriter is live until finish");
        // SAFETY: close finishes and frees the writer (also after an error).
        check(unsafe { sys::elastic_ckpt_writer_close(raw.as_ptr()) })
    }
}

impl Drop for BlobWriter<'_> {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            // SAFETY: an unfinished writer: close finishes and frees it.
            unsafe { sys::elastic_ckpt_writer_close(raw.as_ptr()) };
        }
    }
}

/// The C options for `options` (what is not set keeps the library's default).
fn raw_options(options: &CheckpointOptions<'_>) -> Result<sys::elastic_ckpt_opts> {
        let mut opts: sys::elastic_ckpt_opts = zeroed();
        // SAFETY: opts is a valid elastic_ckpt_opts of the size passed.
        check(unsafe { sys::elastic_ckpt_opts_init(&mut opts, size_of::<sys::elastic_ckpt_opts>()) })?;
        if let Some(c) = options.compression {
            opts.compression = match c {
                Compression::None => sys::ELASTIC_CKPT_NONE,
                Compression::Zstd => sys::ELASTIC_CKPT_ZSTD,
            } as i32;
        }
        if let Some(level) = options.zstd_level {
            opts.zstd_level = level;
        }
        if let Some(threads) = options.threads {
            opts.threads = threads;
        }
        if let Some(fsync) = options.fsync {
            opts.fsync = (if fsync { sys::ELASTIC_CKPT_FSYNC_FULL } else { sys::ELASTIC_CKPT_FSYNC_NONE }) as i32;
        }
        if let Some(keep) = options.keep_last {
            opts.keep_last = keep;
        }
        if let Some(every) = options.keep_every {
            opts.keep_every = every;
        }
        if let Some(rank) = options.rank {
            opts.rank = rank;
        }
        if let Some(world) = options.world {
            opts.world = world;
        }
        if let Some(generation) = options.generation {
            opts.generation = generation;
        }
        if let Some(store) = options.store {
            opts.store = store.as_raw();
        }
        if let Some(Timeout::Default) = options.commit_timeout {
            opts.commit_timeout_ms = sys::ELASTIC_TIMEOUT_DEFAULT;
        }
        set_timeout(&mut opts.commit_timeout_ms, options.commit_timeout);
    Ok(opts)
}

/// Where a worker's restore reads from ([`restore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Memory on this node (the node's memory tier).
    Local,
    /// Memory staged from a peer node's copy.
    Peer,
    /// The disk tier.
    Disk,
}

/// The step a worker restores and the handle to read it from ([`restore`]).
/// Dropping it tells the agent what was read and how long it took (the
/// `checkpoint_restored` event).
#[derive(Debug)]
pub struct Restore<'c, 's> {
    /// The step to read.
    pub step: u64,
    /// Where it is.
    pub source: Source,
    ckpt: &'c Checkpoint<'s>,
}

impl<'c, 's> Restore<'c, 's> {
    /// The handle (memory tier or disk) to read [`Restore::step`] from.
    pub fn checkpoint(&self) -> &'c Checkpoint<'s> {
        self.ckpt
    }
}

impl Drop for Restore<'_, '_> {
    fn drop(&mut self) {
        let _calls = self.ckpt.lock();
        // SAFETY: live handle (borrowed for 'c).
        unsafe { sys::elastic_ckpt_restore_end(self.ckpt.raw()) }
    }
}

/// The step this worker restores, and from which tier: the job's agreed step
/// when the agents planned one (or a newer step committed on a shared-directory
/// disk, of that step's generation or later), else the newer of the memory tier's latest
/// and the disk's (memory on a tie). `None` when neither has a step.
pub fn restore<'c, 's>(memory: Option<&'c Checkpoint<'s>>, disk: Option<&'c Checkpoint<'s>>) -> Result<Option<Restore<'c, 's>>> {
    let _m = memory.map(|c| c.lock());
    let _d = disk.map(|c| c.lock());
    let (mut step, mut from, mut source) = (0u64, ptr::null_mut(), 0i32);
    let raw = |c: Option<&Checkpoint<'s>>| c.map_or(ptr::null_mut(), |c| c.raw());
    // SAFETY: live handles (or NULL), valid out-pointers; both locked.
    let rc = unsafe { sys::elastic_ckpt_restore_begin(raw(memory), raw(disk), &mut step, &mut from, &mut source) };
    if rc == sys::ELASTIC_ENOTFOUND {
        return Ok(None);
    }
    check(rc)?;
    let ckpt = match (memory, disk) {
        (Some(m), _) if m.raw() == from => m,
        (_, Some(d)) => d,
        (Some(m), None) => m,
        (None, None) => unreachable!("restore_begin refuses two NULL handles"),
    };
    let source = match source as u32 {
        sys::ELASTIC_CKPT_SOURCE_LOCAL => Source::Local,
        sys::ELASTIC_CKPT_SOURCE_PEER => Source::Peer,
        _ => Source::Disk,
    };
    Ok(Some(Restore { step, source, ckpt }))
}
