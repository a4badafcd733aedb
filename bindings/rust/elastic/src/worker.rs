//! The in-trainer API: [`Worker`] attaches to the agent that started the
//! process, reports progress, and learns when its group changes.
use std::ffi::CStr;
use std::mem::size_of;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Mutex;
use std::time::Duration;

use elastic_sys as sys;

use crate::error::{check, Error, Result};
use crate::store::StoreRef;
use crate::util::{array_string, set_timeout, zeroed, Timeout};

/// Options of [`Worker::init`]; `None` keeps the library's default.
///
/// ```
/// let mut options = elastic::WorkerOptions::default();
/// options.store_timeout = Some(std::time::Duration::from_secs(60).into());
/// options.stack_dump_signal = Some(0); // never install the stack-dump handler
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// How long connecting to the job's store may take (default 10 s).
    pub store_connect_timeout: Option<Timeout>,
    /// Per-call store deadline, and what [`Timeout::Default`] means for
    /// [`Worker::barrier`] and the worker's store (default 30 s).
    pub store_timeout: Option<Timeout>,
    /// How long [`Worker::poll`] waits for the next generation after an abort (default 10 min).
    pub reconfigure_timeout: Option<Timeout>,
    /// Signal on which the library dumps the trainer thread's stack when the
    /// agent's hang probe asks (default `SIGUSR2`; 0: never).
    pub stack_dump_signal: Option<i32>,
}

/// Who this worker is in the current generation.
///
/// ```
/// let worker = elastic::Worker::init(&Default::default())?;
/// let info = worker.info()?;
/// assert!(info.rank < info.world_size);
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// Global rank, `0..world_size`.
    pub rank: i32,
    /// Rank on this node, `0..local_world_size`.
    pub local_rank: i32,
    /// Workers in the generation.
    pub world_size: i32,
    /// Workers on this node.
    pub local_world_size: i32,
    /// This node's rank among the nodes.
    pub group_rank: i32,
    /// Failures the job has consumed so far.
    pub restart_count: i32,
    /// Grows with every failure or membership change.
    pub generation: u64,
    /// `MASTER_PORT`, 0 when not set.
    pub master_port: i32,
    /// Whether an agent started this process (heartbeats and control channel).
    pub attached: bool,
    /// The job's name (`""` alone without `TORCHELASTIC_RUN_ID`).
    pub run_id: String,
    /// `MASTER_ADDR`, `""` when not set.
    pub master_addr: String,
}

impl WorkerInfo {
    pub(crate) fn from_raw(info: &sys::elastic_worker_info) -> WorkerInfo {
        WorkerInfo {
            rank: info.rank,
            local_rank: info.local_rank,
            world_size: info.world_size,
            local_world_size: info.local_world_size,
            group_rank: info.group_rank,
            restart_count: info.restart_count,
            generation: info.generation,
            master_port: info.master_port,
            attached: info.attached != 0,
            run_id: array_string(&info.run_id),
            master_addr: array_string(&info.master_addr),
        }
    }
}

/// What [`Worker::poll`] found.
///
/// ```
/// let mut worker = elastic::Worker::init(&Default::default())?;
/// assert_eq!(worker.poll()?, elastic::Poll::Unchanged);
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// The group is unchanged: go on.
    Unchanged,
    /// A new generation formed and the reconfigure callback ran: re-create
    /// communicators, reload state, go on.
    Reconfigured,
}

type AbortHook = Mutex<Box<dyn FnMut(u64, &str) + Send>>;
type ReconfigureHook = Box<dyn FnMut(&WorkerInfo) + Send>;

/// The trainer's handle on its agent; detaches (a clean goodbye) on drop.
///
/// `Send` but not `Sync`: heartbeat, poll and barrier must come from one
/// thread at a time (`include/elastic/worker.h`), which `&mut self` ensures.
/// Outside an agent it is a group of one with a private store.
///
/// ```
/// let mut worker = elastic::Worker::init(&Default::default())?;
/// for step in 0..3u64 {
///     // ... compute ...
///     worker.heartbeat(step)?;
///     if worker.poll()? == elastic::Poll::Reconfigured {
///         // reload state for the new generation
///     }
/// }
/// # Ok::<(), elastic::Error>(())
/// ```
pub struct Worker {
    raw: NonNull<sys::elastic_worker>,
    // Every abort hook ever registered stays alive until the worker is closed:
    // the library's thread may still be running a replaced one.
    abort_hooks: Vec<Box<AbortHook>>,
    reconfigure_hook: Option<Box<ReconfigureHook>>,
}

// SAFETY: worker.h lets the handle be used from one thread at a time (not at
// once), so it may move between threads; the hooks it owns are Send.
unsafe impl Send for Worker {}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("raw", &self.raw).finish()
    }
}

unsafe extern "C" fn abort_trampoline(user: *mut c_void, generation: u64, reason: *const c_char) {
    // SAFETY: `user` is a Box<AbortHook> the Worker keeps alive until close.
    let hook = &*(user as *const AbortHook);
    let reason = if reason.is_null() { "".into() } else { CStr::from_ptr(reason).to_string_lossy() };
    // A panic must not unwind into C: it is reported and the hook returns.
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut f = hook.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(generation, &reason)
    }));
    if outcome.is_err() {
        eprintln!("elastic: the worker's abort hook panicked (generation {generation})");
    }
}

unsafe extern "C" fn reconfigure_trampoline(user: *mut c_void, info: *const sys::elastic_worker_info) {
    // SAFETY: `user` is the Worker's current Box<ReconfigureHook>; it runs
    // inside poll(&mut self), so the hook cannot be replaced meanwhile.
    let hook = &mut *(user as *mut ReconfigureHook);
    let mut raw: sys::elastic_worker_info = zeroed();
    // The struct is the library's own: copy only the bytes it says it has.
    let n = (*info).struct_size.min(size_of::<sys::elastic_worker_info>());
    ptr::copy_nonoverlapping(info as *const u8, &mut raw as *mut _ as *mut u8, n);
    let info = WorkerInfo::from_raw(&raw);
    if catch_unwind(AssertUnwindSafe(|| hook(&info))).is_err() {
        eprintln!("elastic: the worker's reconfigure callback panicked (generation {})", info.generation);
    }
}

impl Worker {
    /// Attaches from the environment the agent set; with none of it, a group of one.
    ///
    /// ```
    /// let worker = elastic::Worker::init(&Default::default())?;
    /// println!("rank {} of {}", worker.info()?.rank, worker.info()?.world_size);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn init(options: &WorkerOptions) -> Result<Worker> {
        let opts = raw_options(options)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid options and out-pointer.
        check(unsafe { sys::elastic_worker_init(&opts, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "worker init returned NULL"))?;
        Ok(Worker { raw, abort_hooks: Vec::new(), reconfigure_hook: None })
    }

    /// Rank, world size and generation as of now.
    ///
    /// ```
    /// let worker = elastic::Worker::init(&Default::default())?;
    /// assert_eq!(worker.info()?.world_size, 1); // alone: a group of one
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn info(&self) -> Result<WorkerInfo> {
        let mut info: sys::elastic_worker_info = zeroed();
        info.struct_size = size_of::<sys::elastic_worker_info>();
        // SAFETY: live handle; info is an output struct of the size it says.
        check(unsafe { sys::elastic_worker_get_info(self.raw.as_ptr(), &mut info) })?;
        Ok(WorkerInfo::from_raw(&info))
    }

    /// The job's store scoped to the current generation, or `None` under
    /// plain torchrun. The borrow ends before the next [`poll`](Worker::poll)
    /// or [`barrier`](Worker::barrier), which may re-scope it.
    ///
    /// ```
    /// let worker = elastic::Worker::init(&Default::default())?;
    /// let store = worker.store()?.expect("alone, the worker has a private store");
    /// store.set("k", b"v")?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn store(&self) -> Result<Option<StoreRef<'_>>> {
        let mut raw = ptr::null_mut();
        // SAFETY: live handle; valid out-pointer.
        let rc = unsafe { sys::elastic_worker_get_store(self.raw.as_ptr(), &mut raw) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(None);
        }
        check(rc)?;
        // SAFETY: the worker owns the store until its next reconfigure or close,
        // both of which need &mut self while this borrow of &self lasts.
        Ok(NonNull::new(raw).map(|raw| unsafe { StoreRef::borrowed(raw) }))
    }

    /// Reports progress (cheap: shared memory and a clock read). `step` should grow.
    ///
    /// ```
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// worker.heartbeat(1)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn heartbeat(&mut self, step: u64) -> Result<()> {
        // SAFETY: live handle; &mut self: one thread at a time.
        check(unsafe { sys::elastic_worker_heartbeat(self.raw.as_ptr(), step) })
    }

    /// How long one phase of a recovery took in this worker ("regroup",
    /// "restore", ...), for the agent's `recovery_phases` event. The name is
    /// 1..31 characters of `[a-z0-9_]`; a no-op when not attached.
    pub fn report_phase(&mut self, phase: &str, took: Duration) -> Result<()> {
        let name = crate::util::c_string(phase, "phase name")?;
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: live handle; the name outlives the call.
        check(unsafe { sys::elastic_worker_report_phase(self.raw.as_ptr(), name.as_ptr(), ns) })
    }

    /// Reports the compute part of the last step (without time blocked in
    /// collectives), which the straggler probe scores ranks by.
    ///
    /// ```
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// worker.report_step_time(std::time::Duration::from_millis(12))?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn report_step_time(&mut self, compute: Duration) -> Result<()> {
        let ns = u64::try_from(compute.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: live handle; &mut self: one thread at a time.
        check(unsafe { sys::elastic_worker_report_step_time(self.raw.as_ptr(), ns) })
    }

    /// Sets the hook that runs on the library's thread as soon as the agent
    /// ends the generation, with the generation and the reason, e.g. to abort
    /// a blocked collective. It cannot reach the worker (it must not call
    /// back into it). A panic in it is reported on stderr and swallowed.
    ///
    /// ```
    /// use std::sync::{atomic::{AtomicBool, Ordering}, Arc};
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// let aborted = Arc::new(AtomicBool::new(false));
    /// let flag = aborted.clone();
    /// worker.on_abort(move |generation, reason| {
    ///     eprintln!("generation {generation} ended: {reason}");
    ///     flag.store(true, Ordering::SeqCst);
    /// })?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn on_abort<F>(&mut self, hook: F) -> Result<()>
    where
        F: FnMut(u64, &str) + Send + 'static,
    {
        let hook: Box<AbortHook> = Box::new(Mutex::new(Box::new(hook)));
        let user = &*hook as *const AbortHook as *mut c_void;
        self.abort_hooks.push(hook);
        // SAFETY: the box lives in self.abort_hooks until after elastic_worker_close.
        check(unsafe { sys::elastic_worker_on_abort(self.raw.as_ptr(), Some(abort_trampoline), user) })
    }

    /// Removes the abort hook.
    ///
    /// ```
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// worker.on_abort(|_, _| {})?;
    /// worker.clear_on_abort()?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn clear_on_abort(&mut self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::elastic_worker_on_abort(self.raw.as_ptr(), None, ptr::null_mut()) })
    }

    /// Sets the callback that runs on this thread inside [`poll`](Worker::poll)
    /// with the new generation's info, after the store was re-scoped.
    ///
    /// ```
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// worker.on_reconfigure(|info| println!("now rank {} of {}", info.rank, info.world_size))?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn on_reconfigure<F>(&mut self, callback: F) -> Result<()>
    where
        F: FnMut(&WorkerInfo) + Send + 'static,
    {
        let mut hook: Box<ReconfigureHook> = Box::new(Box::new(callback));
        let user = &mut *hook as *mut ReconfigureHook as *mut c_void;
        // SAFETY: the box is kept in self until replaced, which needs &mut self
        // and so cannot happen during poll, where the callback runs.
        check(unsafe { sys::elastic_worker_on_reconfigure(self.raw.as_ptr(), Some(reconfigure_trampoline), user) })?;
        self.reconfigure_hook = Some(hook);
        Ok(())
    }

    /// Once per step: [`Poll::Unchanged`] while the group is unchanged (one
    /// atomic load). When the generation ended, waits for the next one, runs
    /// the reconfigure callback and returns [`Poll::Reconfigured`].
    /// `ECLOSED` when the agent went away or told the worker to stop;
    /// `ETIMEDOUT` when no new generation came in time.
    ///
    /// ```
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// match worker.poll()? {
    ///     elastic::Poll::Unchanged => {}
    ///     elastic::Poll::Reconfigured => { /* reload */ }
    /// }
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn poll(&mut self) -> Result<Poll> {
        // SAFETY: live handle; &mut self: one thread at a time.
        let rc = unsafe { sys::elastic_worker_poll(self.raw.as_ptr()) };
        if rc == sys::ELASTIC_ERECONFIGURE {
            return Ok(Poll::Reconfigured);
        }
        check(rc).map(|()| Poll::Unchanged)
    }

    /// Waits until every worker of the generation entered the same barrier.
    /// `ERECONFIGURE` when the generation ends meanwhile (then [`poll`](Worker::poll)).
    ///
    /// ```
    /// let mut worker = elastic::Worker::init(&Default::default())?;
    /// worker.barrier(elastic::Timeout::Default)?; // alone: passes at once
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn barrier(&mut self, timeout: Timeout) -> Result<()> {
        // SAFETY: live handle; &mut self: one thread at a time.
        check(unsafe { sys::elastic_worker_barrier(self.raw.as_ptr(), timeout.as_ms()) })
    }
}

/// The C options of `options` (also the loop's, `train_loop.rs`).
pub(crate) fn raw_options(options: &WorkerOptions) -> Result<sys::elastic_worker_opts> {
    let mut opts: sys::elastic_worker_opts = zeroed();
    // SAFETY: opts is a valid elastic_worker_opts of the size passed.
    check(unsafe { sys::elastic_worker_opts_init(&mut opts, size_of::<sys::elastic_worker_opts>()) })?;
    set_timeout(&mut opts.store_connect_timeout_ms, options.store_connect_timeout);
    set_timeout(&mut opts.store_timeout_ms, options.store_timeout);
    set_timeout(&mut opts.reconfigure_timeout_ms, options.reconfigure_timeout);
    if let Some(signal) = options.stack_dump_signal {
        opts.stack_dump_signal = signal;
    }
    Ok(opts)
}

impl Worker {
    /// A view of a worker the loop owns (`elastic_loop_run`): never closed
    /// here, and the hooks registered through it are never freed (the
    /// library may run them until the loop closes the worker).
    pub(crate) fn borrowed(raw: NonNull<sys::elastic_worker>) -> std::mem::ManuallyDrop<Worker> {
        std::mem::ManuallyDrop::new(Worker { raw, abort_hooks: Vec::new(), reconfigure_hook: None })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: last call on the handle; it stops the library's thread, so
        // no hook runs after it and the boxes can go.
        unsafe { sys::elastic_worker_close(self.raw.as_ptr()) }
    }
}

/// Warm spares (`elasticrun --warm-spares`): call once after the costly
/// start-up and before [`Worker::init`]. Not a spare: `Ok(false)` at once. A
/// spare: waits until the agent gives it a failed rank (whose variables are
/// then in the process environment) and returns `Ok(true)`; init then attaches
/// as that rank. `Err` with code `ECLOSED` when the job no longer needs the
/// spare (exit 0). `timeout`: `None` waits until promoted or stopped.
pub fn park(timeout: Option<Duration>) -> Result<bool> {
    let mut opts: sys::elastic_worker_park_opts = zeroed();
    // SAFETY: opts is a live struct of the size passed.
    check(unsafe {
        sys::elastic_worker_park_opts_init(&mut opts, size_of::<sys::elastic_worker_park_opts>())
    })?;
    if let Some(limit) = timeout {
        opts.timeout_ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
    }
    let mut promoted: std::os::raw::c_int = 0;
    // SAFETY: valid pointers for the call; the environment copy is not asked for.
    check(unsafe { sys::elastic_worker_park(&opts, &mut promoted, ptr::null_mut()) })?;
    Ok(promoted != 0)
}
