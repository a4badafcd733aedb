//! Rendezvous: the nodes of a job agree, again after every failure or
//! membership change, on the members and ranks of the next generation
//! ([`Rendezvous`]).
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Mutex;
use std::time::Duration;

use elastic_sys as sys;

use crate::error::{check, Error, Result};
use crate::store::Store;
use crate::util::{array_string, c_string, opt_c_string, opt_ptr, zeroed, Timeout};

/// Options of [`Rendezvous::open`]. `run_id` and either `endpoint` or
/// `store` are needed; `None` keeps the library's default.
///
/// ```
/// let mut options = elastic::RendezvousOptions::new("job-7");
/// options.endpoint = Some("127.0.0.1:29400".into());
/// options.min_nodes = Some(2);
/// options.max_nodes = Some(4);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RendezvousOptions<'s> {
    /// Names the job: 1..64 characters of `[A-Za-z0-9._-]`.
    pub run_id: String,
    /// Store `"host:port"`, used when `store` is `None`.
    pub endpoint: Option<String>,
    /// An open store to use instead (borrowed for the rendezvous' life).
    pub store: Option<&'s Store>,
    /// Store token when connecting by endpoint (default: the environment).
    pub token: Option<String>,
    /// Nodes needed to form a generation (default 1).
    pub min_nodes: Option<i32>,
    /// Most nodes in a generation (default 1).
    pub max_nodes: Option<i32>,
    /// Below `min_nodes` this long: `ENOTENOUGH` (default 10 min).
    pub join_timeout: Option<Duration>,
    /// Once `min_nodes` are in, how long to wait for more (default 30 s).
    pub last_call_timeout: Option<Duration>,
    /// Heartbeat period (default 500 ms, at least 100 ms).
    pub keepalive_interval: Option<Duration>,
    /// Silent this long: evicted (default 2 s, at least 100 ms).
    pub keepalive_timeout: Option<Duration>,
    /// The job-wide failure budget (default 0).
    pub max_restarts: Option<i32>,
    /// Address other nodes reach this node at (default: the hostname).
    pub node_addr: Option<String>,
    /// Workers on this node (default 1).
    pub local_world_size: Option<i32>,
    /// Unique per node (default `"<hostname>-<pid>-<random>"`).
    pub node_id: Option<String>,
    /// Rendezvous on etcd v3 instead of the store (no single node's loss
    /// ends the job); `endpoint` and `store` are then not used.
    pub etcd: Option<EtcdOptions>,
}

/// Where and how to reach etcd v3 for [`RendezvousOptions::etcd`];
/// `None` keeps the library's default.
///
/// ```
/// let mut options = elastic::RendezvousOptions::new("job-7");
/// let mut etcd = elastic::EtcdOptions::new("10.0.0.1:2379,10.0.0.2:2379");
/// etcd.ca_file = Some("/etc/etcd/ca.pem".into());
/// options.etcd = Some(etcd);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct EtcdOptions {
    /// `"host:port[,host:port...]"`, tried in turn.
    pub endpoints: String,
    /// Keys live under `"<prefix>/<run_id>/"` (default `"/elastic"`).
    pub prefix: Option<String>,
    /// TLS: the CA that signed etcd's certificate (default: plain http).
    pub ca_file: Option<String>,
    /// TLS client certificate (default: none).
    pub cert_file: Option<String>,
    /// Its key.
    pub key_file: Option<String>,
    /// etcd authentication (default: none).
    pub user: Option<String>,
    /// The user's password.
    pub password: Option<String>,
    /// Deadline of each etcd request (default 5 s; must be > 0).
    pub timeout: Option<Duration>,
}

impl EtcdOptions {
    /// etcd at these endpoints, everything else default.
    ///
    /// ```
    /// let etcd = elastic::EtcdOptions::new("127.0.0.1:2379");
    /// assert_eq!(etcd.endpoints, "127.0.0.1:2379");
    /// ```
    pub fn new(endpoints: impl Into<String>) -> EtcdOptions {
        EtcdOptions { endpoints: endpoints.into(), ..Default::default() }
    }
}

impl RendezvousOptions<'_> {
    /// Options for the job `run_id`, everything else default.
    ///
    /// ```
    /// let options = elastic::RendezvousOptions::new("my-job");
    /// assert_eq!(options.run_id, "my-job");
    /// ```
    pub fn new(run_id: impl Into<String>) -> Self {
        RendezvousOptions { run_id: run_id.into(), ..Default::default() }
    }
}

/// One generation's membership as this node sees it ([`Rendezvous::next`]).
///
/// ```
/// # let server = elastic::StoreServer::start(&Default::default())?;
/// # let mut options = elastic::RendezvousOptions::new("doc-gen");
/// # options.endpoint = Some(server.endpoint()?);
/// # options.last_call_timeout = Some(std::time::Duration::ZERO);
/// let rdzv = elastic::Rendezvous::open(&options)?;
/// let generation = rdzv.next()?;
/// assert_eq!((generation.group_rank, generation.world_size), (0, 1));
/// # Ok::<(), elastic::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Generation {
    /// Grows by at least 1 per generation, never reused.
    pub generation: u64,
    /// This node's rank among the nodes.
    pub group_rank: i32,
    /// Nodes in the generation.
    pub group_world_size: i32,
    /// Global rank of this node's local rank 0.
    pub rank_base: i32,
    /// Workers on this node.
    pub local_world_size: i32,
    /// Workers in the generation.
    pub world_size: i32,
    /// Failures the job has consumed so far.
    pub restart_count: i32,
    /// The job's failure budget.
    pub max_restarts: i32,
    /// Group rank 0's node address.
    pub master_addr: String,
    /// A free port on group rank 0's node, new each generation.
    pub master_port: i32,
}

/// Why a generation ended.
///
/// ```
/// let kind = elastic::CauseKind::Failure;
/// assert_ne!(kind, elastic::CauseKind::JobEnded);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseKind {
    /// A worker or probe failed: consumes the restart budget.
    Failure,
    /// A member's heartbeat lapsed or its connection closed.
    NodeLost,
    /// A node is waiting to join and there is room.
    NodesWaiting,
    /// A member left on purpose (scale-down).
    NodeLeft,
    /// The job is done or was stopped.
    JobEnded,
    /// A kind newer than this crate.
    Other(i32),
}

impl CauseKind {
    fn from_raw(kind: i32) -> CauseKind {
        match kind {
            k if k == (sys::ELASTIC_RDZV_FAILURE as i32) => CauseKind::Failure,
            k if k == (sys::ELASTIC_RDZV_NODE_LOST as i32) => CauseKind::NodeLost,
            k if k == (sys::ELASTIC_RDZV_NODES_WAITING as i32) => CauseKind::NodesWaiting,
            k if k == (sys::ELASTIC_RDZV_NODE_LEFT as i32) => CauseKind::NodeLeft,
            k if k == (sys::ELASTIC_RDZV_JOB_ENDED as i32) => CauseKind::JobEnded,
            other => CauseKind::Other(other),
        }
    }

    fn to_raw(self) -> i32 {
        match self {
            CauseKind::Failure => sys::ELASTIC_RDZV_FAILURE as i32,
            CauseKind::NodeLost => sys::ELASTIC_RDZV_NODE_LOST as i32,
            CauseKind::NodesWaiting => sys::ELASTIC_RDZV_NODES_WAITING as i32,
            CauseKind::NodeLeft => sys::ELASTIC_RDZV_NODE_LEFT as i32,
            CauseKind::JobEnded => sys::ELASTIC_RDZV_JOB_ENDED as i32,
            CauseKind::Other(k) => k,
        }
    }
}

/// Why a generation ended: read from [`Rendezvous::watch`], passed to
/// [`Rendezvous::end_generation`].
///
/// ```
/// let mut cause = elastic::Cause::new(elastic::CauseKind::Failure, "loss is NaN");
/// cause.rank = 3;
/// cause.exit_code = 1;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cause {
    /// What happened.
    pub kind: CauseKind,
    /// The generation that ended (filled by the library).
    pub generation: u64,
    /// The node that reported or was lost.
    pub node_id: String,
    /// The failed worker's global rank, -1 if none.
    pub rank: i32,
    /// The worker's exit code, -1 if none.
    pub exit_code: i32,
    /// The signal that killed it, 0 if none.
    pub signal: i32,
    /// A probe name or a short sentence (at most 255 bytes are kept).
    pub reason: String,
    /// When it happened, in ms since the epoch (filled by the library).
    pub time_ms: u64,
}

impl Cause {
    /// A cause of this kind with a reason; no rank, exit code or signal.
    ///
    /// ```
    /// let cause = elastic::Cause::new(elastic::CauseKind::NodeLeft, "scaling down");
    /// assert_eq!(cause.rank, -1);
    /// ```
    pub fn new(kind: CauseKind, reason: impl Into<String>) -> Cause {
        Cause {
            kind,
            generation: 0,
            node_id: String::new(),
            rank: -1,
            exit_code: -1,
            signal: 0,
            reason: reason.into(),
            time_ms: 0,
        }
    }

    fn from_raw(c: &sys::elastic_rdzv_cause) -> Cause {
        Cause {
            kind: CauseKind::from_raw(c.kind),
            generation: c.generation,
            node_id: array_string(&c.node_id),
            rank: c.rank,
            exit_code: c.exit_code,
            signal: c.signal,
            reason: array_string(&c.reason),
            time_ms: c.time_ms,
        }
    }

    fn to_raw(&self) -> sys::elastic_rdzv_cause {
        let mut c: sys::elastic_rdzv_cause = zeroed();
        c.struct_size = size_of::<sys::elastic_rdzv_cause>();
        c.kind = self.kind.to_raw();
        c.generation = self.generation;
        copy_truncated(&mut c.node_id, &self.node_id);
        c.rank = self.rank;
        c.exit_code = self.exit_code;
        c.signal = self.signal;
        copy_truncated(&mut c.reason, &self.reason);
        c.time_ms = self.time_ms;
        c
    }
}

/// Copies a string into a C char array, cut to fit with its NUL.
fn copy_truncated(dst: &mut [std::os::raw::c_char], src: &str) {
    let n = src.len().min(dst.len() - 1);
    for (d, &b) in dst.iter_mut().zip(&src.as_bytes()[..n]) {
        *d = b as std::os::raw::c_char;
    }
    dst[n] = 0;
}

fn ms(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

type ChangeHook = Mutex<Box<dyn FnMut(&Cause) + Send>>;

unsafe extern "C" fn change_trampoline(user: *mut c_void, cause: *const sys::elastic_rdzv_cause) {
    // SAFETY: `user` is a Box<ChangeHook> the Rendezvous keeps until it is freed.
    let hook = &*(user as *const ChangeHook);
    let mut raw: sys::elastic_rdzv_cause = zeroed();
    // The struct is the library's own: copy only the bytes it says it has.
    let n = (*cause).struct_size.min(size_of::<sys::elastic_rdzv_cause>());
    ptr::copy_nonoverlapping(cause as *const u8, &mut raw as *mut _ as *mut u8, n);
    let cause = Cause::from_raw(&raw);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut f = hook.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&cause)
    }));
    if outcome.is_err() {
        eprintln!("elastic: the rendezvous change hook panicked (generation {})", cause.generation);
    }
}

/// This node's membership in a job's rendezvous; freed on drop (the
/// heartbeat stops without leaving: the others see the node lost).
///
/// `Send + Sync`: every call may come from any thread, several at once
/// (`include/elastic/rdzv.h`), e.g. [`watch`](Rendezvous::watch) on one
/// thread while another ends the generation.
///
/// ```
/// let server = elastic::StoreServer::start(&Default::default())?;
/// let mut options = elastic::RendezvousOptions::new("doc-job");
/// options.endpoint = Some(server.endpoint()?);
/// options.last_call_timeout = Some(std::time::Duration::ZERO);
/// let rdzv = elastic::Rendezvous::open(&options)?;
/// let generation = rdzv.next()?;
/// println!("generation {}: {} workers", generation.generation, generation.world_size);
/// rdzv.end_job()?;
/// # Ok::<(), elastic::Error>(())
/// ```
pub struct Rendezvous<'s> {
    raw: NonNull<sys::elastic_rdzv>,
    // Every change hook ever registered lives until the handle is freed: the
    // watcher thread may still be running a replaced one.
    hooks: Mutex<Vec<Box<ChangeHook>>>,
    store: PhantomData<&'s Store>,
}

// SAFETY: rdzv.h: "every call on one handle may come from any thread, several
// at once, except elastic_rdzv_free" (Drop: the last call); the hooks are Send.
unsafe impl Send for Rendezvous<'_> {}
unsafe impl Sync for Rendezvous<'_> {}

impl std::fmt::Debug for Rendezvous<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendezvous").field("raw", &self.raw).finish()
    }
}

impl<'s> Rendezvous<'s> {
    /// Connects (or adopts the store) and starts this node's heartbeat; does not join yet.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// let store = elastic::Store::connect(&server.endpoint()?, &Default::default())?;
    /// let mut options = elastic::RendezvousOptions::new("doc-open");
    /// options.store = Some(&store);
    /// let rdzv = elastic::Rendezvous::open(&options)?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn open(options: &RendezvousOptions<'s>) -> Result<Rendezvous<'s>> {
        let run_id = c_string(&options.run_id, "run_id")?;
        let endpoint = opt_c_string(options.endpoint.as_deref(), "endpoint")?;
        let token = opt_c_string(options.token.as_deref(), "token")?;
        let node_addr = opt_c_string(options.node_addr.as_deref(), "node_addr")?;
        let node_id = opt_c_string(options.node_id.as_deref(), "node_id")?;
        let etcd = options.etcd.as_ref();
        let etcd_string = |f: fn(&EtcdOptions) -> Option<&str>, what| opt_c_string(etcd.and_then(f), what);
        let etcd_endpoints = etcd_string(|e| Some(e.endpoints.as_str()), "etcd endpoints")?;
        let etcd_prefix = etcd_string(|e| e.prefix.as_deref(), "etcd prefix")?;
        let etcd_ca_file = etcd_string(|e| e.ca_file.as_deref(), "etcd ca_file")?;
        let etcd_cert_file = etcd_string(|e| e.cert_file.as_deref(), "etcd cert_file")?;
        let etcd_key_file = etcd_string(|e| e.key_file.as_deref(), "etcd key_file")?;
        let etcd_user = etcd_string(|e| e.user.as_deref(), "etcd user")?;
        let etcd_password = etcd_string(|e| e.password.as_deref(), "etcd password")?;
        let mut opts: sys::elastic_rdzv_opts = zeroed();
        // SAFETY: opts is a valid elastic_rdzv_opts of the size passed.
        check(unsafe { sys::elastic_rdzv_opts_init(&mut opts, size_of::<sys::elastic_rdzv_opts>()) })?;
        opts.run_id = run_id.as_ptr();
        opts.endpoint = opt_ptr(&endpoint);
        if let Some(store) = options.store {
            opts.store = store.as_raw();
        }
        if token.is_some() {
            opts.token = opt_ptr(&token);
        }
        if node_addr.is_some() {
            opts.node_addr = opt_ptr(&node_addr);
        }
        if node_id.is_some() {
            opts.node_id = opt_ptr(&node_id);
        }
        let set = |field: &mut i32, value: Option<i32>| {
            if let Some(v) = value {
                *field = v;
            }
        };
        set(&mut opts.min_nodes, options.min_nodes);
        set(&mut opts.max_nodes, options.max_nodes);
        set(&mut opts.join_timeout_ms, options.join_timeout.map(ms));
        set(&mut opts.last_call_timeout_ms, options.last_call_timeout.map(ms));
        set(&mut opts.keepalive_interval_ms, options.keepalive_interval.map(ms));
        set(&mut opts.keepalive_timeout_ms, options.keepalive_timeout.map(ms));
        set(&mut opts.max_restarts, options.max_restarts);
        set(&mut opts.local_world_size, options.local_world_size);
        if let Some(etcd) = etcd {
            opts.backend = sys::ELASTIC_RDZV_BACKEND_ETCD as i32;
            opts.etcd_endpoints = opt_ptr(&etcd_endpoints);
            let keep_default = |field: &mut *const std::os::raw::c_char, value: &Option<std::ffi::CString>| {
                if value.is_some() {
                    *field = opt_ptr(value);
                }
            };
            keep_default(&mut opts.etcd_prefix, &etcd_prefix);
            keep_default(&mut opts.etcd_ca_file, &etcd_ca_file);
            keep_default(&mut opts.etcd_cert_file, &etcd_cert_file);
            keep_default(&mut opts.etcd_key_file, &etcd_key_file);
            keep_default(&mut opts.etcd_user, &etcd_user);
            keep_default(&mut opts.etcd_password, &etcd_password);
            set(&mut opts.etcd_timeout_ms, etcd.timeout.map(ms));
        }
        let mut raw = ptr::null_mut();
        // SAFETY: the strings and opts live across the call; the store outlives 's.
        check(unsafe { sys::elastic_rdzv_open(&opts, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(sys::ELASTIC_ENOMEM, "rdzv open returned NULL"))?;
        Ok(Rendezvous { raw, hooks: Mutex::new(Vec::new()), store: PhantomData })
    }

    fn raw(&self) -> *mut sys::elastic_rdzv {
        self.raw.as_ptr()
    }

    /// Blocks until the next generation forms with this node in it.
    /// `ENOTENOUGH`: too few nodes in time; `EBUDGET`: the restart budget is
    /// spent; `ECLOSED`: the job ended.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-next");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # options.last_call_timeout = Some(std::time::Duration::ZERO);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// let first = rdzv.next()?;
    /// assert!(first.generation >= 1);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn next(&self) -> Result<Generation> {
        let mut r: sys::elastic_rdzv_result = zeroed();
        r.struct_size = size_of::<sys::elastic_rdzv_result>();
        // SAFETY: live handle; r is an output struct of the size it says.
        check(unsafe { sys::elastic_rdzv_next(self.raw(), &mut r) })?;
        Ok(Generation {
            generation: r.generation,
            group_rank: r.group_rank,
            group_world_size: r.group_world_size,
            rank_base: r.rank_base,
            local_world_size: r.local_world_size,
            world_size: r.world_size,
            restart_count: r.restart_count,
            max_restarts: r.max_restarts,
            master_addr: array_string(&r.master_addr),
            master_port: r.master_port,
        })
    }

    /// Ends the current generation for every member, recording `cause` (a
    /// [`CauseKind::Failure`] consumes one restart). The first cause wins.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-end");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # options.last_call_timeout = Some(std::time::Duration::ZERO);
    /// # options.max_restarts = Some(1);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// rdzv.next()?;
    /// rdzv.end_generation(&elastic::Cause::new(elastic::CauseKind::Failure, "worker 0 exited 1"))?;
    /// assert_eq!(rdzv.next()?.restart_count, 1);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn end_generation(&self, cause: &Cause) -> Result<()> {
        let raw = cause.to_raw();
        // SAFETY: live handle; a complete cause struct.
        check(unsafe { sys::elastic_rdzv_end_generation(self.raw(), &raw) })
    }

    /// Blocks up to `timeout` until the current generation must end and says
    /// why (`ETIMEDOUT` when it did not).
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-watch");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # options.last_call_timeout = Some(std::time::Duration::ZERO);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// rdzv.next()?;
    /// rdzv.end_job()?;
    /// let cause = rdzv.watch(elastic::Timeout::NoLimit)?;
    /// assert_eq!(cause.kind, elastic::CauseKind::JobEnded);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn watch(&self, timeout: Timeout) -> Result<Cause> {
        let mut c: sys::elastic_rdzv_cause = zeroed();
        c.struct_size = size_of::<sys::elastic_rdzv_cause>();
        // SAFETY: live handle; c is an output struct of the size it says.
        check(unsafe { sys::elastic_rdzv_watch(self.raw(), timeout.as_ms(), &mut c) })?;
        Ok(Cause::from_raw(&c))
    }

    /// Sets the hook run on the library's watcher thread once per generation
    /// as soon as it must end. A panic in it is reported and swallowed.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-change");
    /// # options.endpoint = Some(server.endpoint()?);
    /// let rdzv = elastic::Rendezvous::open(&options)?;
    /// rdzv.on_change(|cause| eprintln!("generation {} ends: {:?}", cause.generation, cause.kind))?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn on_change<F>(&self, hook: F) -> Result<()>
    where
        F: FnMut(&Cause) + Send + 'static,
    {
        let hook: Box<ChangeHook> = Box::new(Mutex::new(Box::new(hook)));
        let user = &*hook as *const ChangeHook as *mut c_void;
        self.hooks.lock().unwrap_or_else(|p| p.into_inner()).push(hook);
        // SAFETY: the box lives in self.hooks until after elastic_rdzv_free.
        check(unsafe { sys::elastic_rdzv_on_change(self.raw(), Some(change_trampoline), user) })
    }

    /// The first failure the job recorded, or `None`.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-first");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// assert_eq!(rdzv.first_failure()?, None);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn first_failure(&self) -> Result<Option<Cause>> {
        let mut c: sys::elastic_rdzv_cause = zeroed();
        c.struct_size = size_of::<sys::elastic_rdzv_cause>();
        // SAFETY: live handle; c is an output struct of the size it says.
        let rc = unsafe { sys::elastic_rdzv_first_failure(self.raw(), &mut c) };
        if rc == sys::ELASTIC_ENOTFOUND {
            return Ok(None);
        }
        check(rc).map(|()| Some(Cause::from_raw(&c)))
    }

    /// This node's workers all succeeded: it may go away without ending the
    /// generation for the others.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-finish");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # options.last_call_timeout = Some(std::time::Duration::ZERO);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// rdzv.next()?;
    /// rdzv.finish()?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn finish(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::elastic_rdzv_finish(self.raw()) })
    }

    /// This node leaves on purpose; the others re-form without consuming budget.
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-leave");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # options.last_call_timeout = Some(std::time::Duration::ZERO);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// rdzv.next()?;
    /// rdzv.leave()?;
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn leave(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::elastic_rdzv_leave(self.raw()) })
    }

    /// Ends the job for EVERY node: their next call returns `ECLOSED`.
    /// (Dropping the handle only releases this node's.)
    ///
    /// ```
    /// # let server = elastic::StoreServer::start(&Default::default())?;
    /// # let mut options = elastic::RendezvousOptions::new("doc-endjob");
    /// # options.endpoint = Some(server.endpoint()?);
    /// # let rdzv = elastic::Rendezvous::open(&options)?;
    /// rdzv.end_job()?;
    /// assert_eq!(rdzv.next().unwrap_err().code, elastic::code::ECLOSED);
    /// # Ok::<(), elastic::Error>(())
    /// ```
    pub fn end_job(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::elastic_rdzv_end_job(self.raw()) })
    }
}

impl Drop for Rendezvous<'_> {
    fn drop(&mut self) {
        // SAFETY: the last call on the handle; it stops the watcher thread,
        // after which the hooks can go.
        unsafe { sys::elastic_rdzv_free(self.raw.as_ptr()) }
    }
}
