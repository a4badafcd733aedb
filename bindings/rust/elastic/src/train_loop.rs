//! The training loop that owns recovery (`include/elastic/loop.h`): a
//! [`Trainer`] says how to build a generation's pieces, train one step, turn
//! its state into blobs and back; [`run_loop`] parks a warm spare, restores
//! the job's agreed step from the cheapest tier, heartbeats, saves to memory
//! and disk on intervals, and after a peer's death reloads and goes on in the
//! same process (elasticrun `--in-process-recovery`).
use std::mem::size_of;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::ptr::{self, NonNull};
use std::time::Duration;

use elastic_sys as sys;

use crate::ckpt::{raw_blobs, Blob, Checkpoint, Compression, RawBlobs, Source};
use crate::error::{check, Error, Result};
use crate::util::{c_string, zeroed};
use crate::worker::{raw_options, Worker, WorkerInfo, WorkerOptions};

/// What the loop calls, always on the thread that called [`run_loop`] and one
/// at a time. An `Err` ends the run with that error, except one with code
/// `ERECONFIGURE` from [`Trainer::step`]: the step failed because the group
/// changed (a collective aborted, [`Worker::poll`] said so); the loop waits
/// for the next generation, reloads the agreed step and trains from there.
///
/// ```
/// use elastic::{Blob, Checkpoint, Source, Trainer, Worker, WorkerInfo};
/// struct Counter { total: u64, bytes: [u8; 8] }
/// impl Trainer for Counter {
///     fn build(&mut self, _: &mut Worker, _: &WorkerInfo) -> elastic::Result<()> { Ok(()) }
///     fn step(&mut self, _: &mut Worker, step: u64) -> elastic::Result<()> {
///         self.total += step + 1;
///         Ok(())
///     }
///     fn save(&mut self, _: u64, _: Source) -> elastic::Result<Vec<Blob<'_>>> {
///         self.bytes = self.total.to_le_bytes();
///         Ok(vec![Blob::new("total", &self.bytes).replicated()])
///     }
///     fn load(&mut self, from: Option<&Checkpoint<'_>>, step: u64) -> elastic::Result<()> {
///         self.total = match from {
///             Some(ckpt) => u64::from_le_bytes(ckpt.read(step, "total")?.try_into().unwrap()),
///             None => 0, // no checkpoint: the start
///         };
///         Ok(())
///     }
/// }
/// let mut options = elastic::LoopOptions::new(10);
/// options.park = Some(false);
/// let mut counter = Counter { total: 0, bytes: [0; 8] };
/// let result = elastic::run_loop(&mut counter, &options)?;
/// assert_eq!((result.steps, counter.total), (10, 55));
/// # Ok::<(), elastic::Error>(())
/// ```
pub trait Trainer {
    /// Builds what the generation needs, after its state was loaded (every
    /// generation; rank and world size may have changed): e.g. a communicator.
    fn build(&mut self, worker: &mut Worker, info: &WorkerInfo) -> Result<()>;
    /// Trains step `step` (steps done so far; the state is that step's).
    fn step(&mut self, worker: &mut Worker, step: u64) -> Result<()>;
    /// The state after `step` steps as blobs, for the memory tier
    /// ([`Source::Local`]) or the disk ([`Source::Disk`]).
    fn save(&mut self, step: u64, tier: Source) -> Result<Vec<Blob<'_>>>;
    /// Loads step `step` from `from`; `None` (step 0): no checkpoint, reset
    /// to the initial state.
    fn load(&mut self, from: Option<&Checkpoint<'_>>, step: u64) -> Result<()>;
}

/// Options of [`run_loop`]; `None` keeps the library's default.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct LoopOptions {
    /// Train until this many steps are done (required, > 0).
    pub steps: u64,
    /// The disk tier's directory, shared by every rank; `None`: no disk tier.
    pub dir: Option<PathBuf>,
    /// Save to the node's memory tier every N steps (default 1; 0: never).
    pub memory_every: Option<u64>,
    /// Save to `dir` every M steps (default 100; 0: never).
    pub disk_every: Option<u64>,
    /// Asynchronous disk saves (default true).
    pub disk_async: Option<bool>,
    /// Disk retention: the newest N steps (default 3; 0: all).
    pub keep_last: Option<u32>,
    /// The disk tier's compression (default none).
    pub compression: Option<Compression>,
    /// Park when started as a warm spare (default true).
    pub park: Option<bool>,
    /// The worker the loop attaches.
    pub worker: WorkerOptions,
    /// How long a failed step waits for the generation to end (default 30 s).
    pub failure_grace: Option<Duration>,
}

impl LoopOptions {
    /// The defaults, training `steps` steps.
    pub fn new(steps: u64) -> LoopOptions {
        LoopOptions { steps, ..Default::default() }
    }
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoopResult {
    /// Steps done when the run returned.
    pub steps: u64,
    /// The last generation it trained in.
    pub generation: u64,
    /// Its rank there.
    pub rank: i32,
    /// Its world size there.
    pub world_size: i32,
    /// Generations it reloaded in place.
    pub recoveries: i32,
    /// Steps trained again after recoveries, in all.
    pub redone: u64,
    /// A warm spare the job never needed (nothing trained: exit 0).
    pub released: bool,
    /// Where the last restore read from; `None`: it started fresh.
    pub restored: Option<Source>,
}

/// The trainer and what must outlive a callback: the blobs' C array and
/// names (valid until the next save), and the first Rust error (its
/// detail, which C would only see as a code).
struct Adapter<'t, T: Trainer> {
    trainer: &'t mut T,
    blobs: Option<RawBlobs>,
    error: Option<Error>,
}

impl<T: Trainer> Adapter<'_, T> {
    /// A callback's result as a C code; a panic is an error too (never unwinds into C).
    fn code(&mut self, outcome: std::thread::Result<Result<()>>, what: &str) -> c_int {
        match outcome {
            Ok(Ok(())) => 0,
            Ok(Err(e)) if e.code == sys::ELASTIC_ERECONFIGURE && what == "step" => e.code,
            Ok(Err(e)) => {
                let code = e.code;
                self.error.get_or_insert(e);
                code
            }
            Err(_) => {
                let e = Error::new(sys::ELASTIC_EINVAL, format!("the trainer's {what} panicked"));
                self.error.get_or_insert(e);
                sys::ELASTIC_EINVAL
            }
        }
    }
}

// SAFETY (all four trampolines): `user` is the &mut Adapter run_loop holds on
// its stack for the whole elastic_loop_run, which calls one callback at a
// time on this thread; the worker and checkpoint pointers are live handles
// the loop owns for the duration of the call.

unsafe extern "C" fn build_trampoline<T: Trainer>(
    user: *mut c_void,
    worker: *mut sys::elastic_worker,
    info: *const sys::elastic_worker_info,
) -> c_int {
    let a = &mut *(user as *mut Adapter<'_, T>);
    let info = WorkerInfo::from_raw(&*info);
    let mut worker = Worker::borrowed(NonNull::new_unchecked(worker));
    let outcome = catch_unwind(AssertUnwindSafe(|| a.trainer.build(&mut worker, &info)));
    a.code(outcome, "build")
}

unsafe extern "C" fn step_trampoline<T: Trainer>(user: *mut c_void, worker: *mut sys::elastic_worker, step: u64) -> c_int {
    let a = &mut *(user as *mut Adapter<'_, T>);
    let mut worker = Worker::borrowed(NonNull::new_unchecked(worker));
    let outcome = catch_unwind(AssertUnwindSafe(|| a.trainer.step(&mut worker, step)));
    a.code(outcome, "step")
}

unsafe extern "C" fn save_trampoline<T: Trainer>(
    user: *mut c_void,
    step: u64,
    tier: c_int,
    blobs: *mut *const sys::elastic_ckpt_blob,
    n: *mut usize,
) -> c_int {
    let a = &mut *(user as *mut Adapter<'_, T>);
    let tier = if tier as u32 == sys::ELASTIC_CKPT_SOURCE_DISK { Source::Disk } else { Source::Local };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // The blobs borrow the trainer; their C copies point into the same
        // memory, which nothing touches until the loop's next callback.
        let list = a.trainer.save(step, tier)?;
        a.blobs = Some(raw_blobs(&list)?);
        Ok(())
    }));
    let rc = a.code(outcome, "save");
    let kept = a.blobs.as_ref().map_or(&[][..], |b| &b.blobs[..]);
    *blobs = if rc == 0 && !kept.is_empty() { kept.as_ptr() } else { ptr::null() };
    *n = if rc == 0 { kept.len() } else { 0 };
    rc
}

unsafe extern "C" fn load_trampoline<T: Trainer>(user: *mut c_void, from: *mut sys::elastic_ckpt, step: u64) -> c_int {
    let a = &mut *(user as *mut Adapter<'_, T>);
    let view = NonNull::new(from).map(Checkpoint::borrowed);
    let outcome = catch_unwind(AssertUnwindSafe(|| a.trainer.load(view.as_deref(), step)));
    a.code(outcome, "load")
}

/// Runs `trainer` until `options.steps` are done (see [`Trainer`] and
/// `include/elastic/loop.h`). `Err` with the trainer's own error when a
/// callback failed; `ECLOSED` when the agent stopped the worker.
pub fn run_loop<T: Trainer>(trainer: &mut T, options: &LoopOptions) -> Result<LoopResult> {
    let mut opts: sys::elastic_loop_opts = zeroed();
    // SAFETY: opts is a valid elastic_loop_opts of the size passed.
    check(unsafe { sys::elastic_loop_opts_init(&mut opts, size_of::<sys::elastic_loop_opts>()) })?;
    let dir = match &options.dir {
        Some(dir) => Some(c_string(dir.to_str().ok_or_else(|| Error::new(sys::ELASTIC_EINVAL, "dir is not UTF-8"))?, "dir")?),
        None => None,
    };
    let worker_opts = raw_options(&options.worker)?;
    opts.steps = options.steps;
    opts.dir = dir.as_ref().map_or(ptr::null(), |d| d.as_ptr());
    opts.memory_every = options.memory_every.unwrap_or(opts.memory_every);
    opts.disk_every = options.disk_every.unwrap_or(opts.disk_every);
    opts.disk_async = options.disk_async.map_or(opts.disk_async, c_int::from);
    opts.keep_last = options.keep_last.unwrap_or(opts.keep_last);
    if let Some(compression) = options.compression {
        opts.compression = match compression {
            Compression::None => sys::ELASTIC_CKPT_NONE as c_int,
            Compression::Zstd => sys::ELASTIC_CKPT_ZSTD as c_int,
        };
    }
    opts.park = options.park.map_or(opts.park, c_int::from);
    opts.worker_opts = &worker_opts;
    if let Some(grace) = options.failure_grace {
        opts.failure_grace_ms = c_int::try_from(grace.as_millis()).unwrap_or(c_int::MAX).max(1);
    }
    let mut adapter = Adapter { trainer, blobs: None, error: None };
    opts.user = &mut adapter as *mut Adapter<'_, T> as *mut c_void;
    opts.build = Some(build_trampoline::<T>);
    opts.step = Some(step_trampoline::<T>);
    opts.save = Some(save_trampoline::<T>);
    opts.load = Some(load_trampoline::<T>);
    let mut raw: sys::elastic_loop_result = zeroed();
    raw.struct_size = size_of::<sys::elastic_loop_result>();
    // SAFETY: valid options (dir and worker_opts outlive the call) and result;
    // the adapter outlives the call and is only used through `user` meanwhile.
    let rc = unsafe { sys::elastic_loop_run(&opts, &mut raw) };
    if rc != 0 {
        let library = Error::last(rc);
        return Err(adapter.error.take().unwrap_or(library));
    }
    Ok(LoopResult {
        steps: raw.steps,
        generation: raw.generation,
        rank: raw.rank,
        world_size: raw.world_size,
        recoveries: raw.recoveries,
        redone: raw.redone,
        released: raw.released != 0,
        restored: match raw.restored_source as u32 {
            0 => None,
            sys::ELASTIC_CKPT_SOURCE_LOCAL => Some(Source::Local),
            sys::ELASTIC_CKPT_SOURCE_PEER => Some(Source::Peer),
            _ => Some(Source::Disk),
        },
    })
}
