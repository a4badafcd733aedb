//! Two Rust workers under a real `elasticrun`: they attach, exchange values
//! through the job's store, meet at a barrier and commit a checkpoint
//! together; with in-process recovery the surviving worker's abort hook runs
//! on the library's thread and `poll` reconfigures it in the same process.
//!
//! The workers are this test binary itself, re-run by elasticrun with
//! `--ignored --exact job_worker` and ELASTIC_RUST_TEST_ROLE set.
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use elastic::{Blob, Checkpoint, CheckpointOptions, Poll, Timeout, Worker, WorkerOptions};

fn elasticrun() -> PathBuf {
    let dir = std::env::var_os("ELASTIC_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../bin"));
    let path = dir.join("elasticrun");
    assert!(path.exists(), "{} is missing: run `make` (or set ELASTIC_BIN_DIR)", path.display());
    path
}

/// Runs elasticrun with this binary as the workers; returns (exit status, output).
fn run_job(role: &str, extra_flags: &[&str], dir: &std::path::Path) -> (std::process::ExitStatus, String) {
    let me = std::env::current_exe().expect("test binary path");
    let mut command = Command::new(elasticrun());
    command.args(["--standalone", "--nproc-per-node=2", "--no-python"]).args(extra_flags);
    command.arg(&me).args(["--ignored", "--exact", "job_worker", "--nocapture", "--test-threads=1"]);
    command.env("ELASTIC_RUST_TEST_ROLE", role).env("ELASTIC_RUST_TEST_DIR", dir);
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start elasticrun");
    let output = Arc::new(Mutex::new(String::new()));
    let readers: Vec<_> = [child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
                           child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>)]
        .into_iter()
        .flatten()
        .map(|mut stream| {
            let output = output.clone();
            thread::spawn(move || {
                let mut text = String::new();
                let _ = stream.read_to_string(&mut text);
                output.lock().unwrap().push_str(&text);
            })
        })
        .collect();
    // Every wait has a deadline: a stuck job is killed and reported.
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for elasticrun") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            readers.into_iter().for_each(|r| drop(r.join()));
            panic!("elasticrun did not finish in 180 s:\n{}", output.lock().unwrap());
        }
        thread::sleep(Duration::from_millis(20));
    };
    readers.into_iter().for_each(|r| r.join().unwrap());
    let text = output.lock().unwrap().clone();
    (status, text)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("elastic-rust-job-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn two_workers_under_elasticrun_share_the_store_and_commit_a_checkpoint() {
    let dir = temp_dir("share");
    let (status, output) = run_job("share", &[], &dir);
    assert!(status.success(), "elasticrun failed ({status}):\n{output}");
    for rank in 0..2 {
        let peer = 1 - rank;
        let expected = format!("rust-worker rank={rank} world=2 attached=true peer-said=hello-from-{peer} latest=2");
        assert!(output.contains(&expected), "no {expected:?} in:\n{output}");
    }
    let ckpt = Checkpoint::open(dir.join("ckpt"), &Default::default()).unwrap();
    assert_eq!(ckpt.latest().unwrap(), Some(2));
    assert_eq!(ckpt.read_shard(2, 1, "rank").unwrap(), b"1");
    drop(ckpt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn in_process_recovery_runs_the_abort_hook_and_reconfigures_the_survivor() {
    let dir = temp_dir("recover");
    let flags = ["--max-restarts=1", "--in-process-recovery", "--abort-ack-timeout=30"];
    let (status, output) = run_job("recover", &flags, &dir);
    assert!(status.success(), "elasticrun failed ({status}):\n{output}");
    assert!(output.contains("rust-worker rank=1 generation=1 failing on purpose"), "{output}");
    // The survivor: the hook ran on another thread than poll, then poll
    // reconfigured it into generation 2 in the same process.
    let survivor = output
        .lines()
        .find(|l| l.contains("rust-worker rank=0 survived"))
        .unwrap_or_else(|| panic!("no survivor line in:\n{output}"));
    assert!(survivor.contains("abort-hook-generation=1 hook-on-other-thread=true"), "{survivor}");
    assert!(survivor.contains("reconfigured-to=2 info-generation=2"), "{survivor}");
    // ... and it is the process that started in generation 1, never restarted.
    let starts: Vec<&str> = output.lines().filter(|l| l.contains("rust-worker rank=0 started")).collect();
    assert_eq!(starts.len(), 1, "rank 0 started more than once:\n{output}");
    assert!(starts[0].contains("generation=1"), "{}", starts[0]);
    let pid = starts[0].rsplit("pid=").next().unwrap();
    assert!(survivor.ends_with(&format!("pid={pid}")), "{survivor} vs {}", starts[0]);
    assert!(output.contains("rust-worker rank=1 generation=2 replacement done"), "{output}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The worker side, run only by elasticrun (see run_job).
#[test]
#[ignore = "a worker of the elasticrun tests above, not a test on its own"]
fn job_worker() {
    let role = std::env::var("ELASTIC_RUST_TEST_ROLE").expect("run by the elasticrun tests");
    let dir = PathBuf::from(std::env::var("ELASTIC_RUST_TEST_DIR").expect("ELASTIC_RUST_TEST_DIR"));
    match role.as_str() {
        "share" => share_worker(&dir),
        "recover" => recover_worker(),
        other => panic!("unknown role {other}"),
    }
}

fn share_worker(dir: &std::path::Path) {
    let mut worker = Worker::init(&Default::default()).unwrap();
    let info = worker.info().unwrap();
    let peer = 1 - info.rank;
    let said = {
        let store = worker.store().unwrap().expect("a store under elasticrun");
        store.set(&format!("hello/{}", info.rank), format!("hello-from-{}", info.rank).as_bytes()).unwrap();
        String::from_utf8(store.get(&format!("hello/{peer}"), Duration::from_secs(60).into()).unwrap()).unwrap()
    };
    worker.heartbeat(1).unwrap();
    worker.barrier(Timeout::After(Duration::from_secs(60))).unwrap();
    let mut options = CheckpointOptions::default();
    options.rank = Some(info.rank as u32);
    options.world = Some(info.world_size as u32);
    options.generation = Some(info.generation);
    let ckpt = Checkpoint::open(dir.join("ckpt"), &options).unwrap();
    let rank_text = info.rank.to_string();
    ckpt.save(2, &[Blob::new("rank", rank_text.as_bytes()), Blob::new("model", b"same").replicated()]).unwrap();
    worker.barrier(Timeout::After(Duration::from_secs(60))).unwrap(); // every rank committed
    println!(
        "rust-worker rank={} world={} attached={} peer-said={said} latest={}",
        info.rank,
        info.world_size,
        info.attached,
        ckpt.latest().unwrap().map_or(0, |s| s)
    );
}

fn recover_worker() {
    let mut options = WorkerOptions::default();
    options.reconfigure_timeout = Some(Duration::from_secs(120).into());
    let mut worker = Worker::init(&options).unwrap();
    let info = worker.info().unwrap();
    println!("rust-worker rank={} started generation={} pid={}", info.rank, info.generation, std::process::id());
    if info.rank == 1 {
        if info.generation == 1 {
            for step in 1..=5 {
                worker.heartbeat(step).unwrap();
            }
            // Fail only once rank 0 runs with its hooks set: an earlier exit
            // would test the agent's start-up, not in-process recovery.
            let store = worker.store().unwrap().expect("a store under elasticrun");
            store.get("rank0-hooked", Duration::from_secs(60).into()).unwrap();
            println!("rust-worker rank=1 generation=1 failing on purpose");
            std::process::exit(3);
        }
        worker.heartbeat(1).unwrap();
        println!("rust-worker rank=1 generation={} replacement done", info.generation);
        return;
    }
    let main_thread = thread::current().id();
    let aborted: Arc<Mutex<Option<(u64, bool)>>> = Arc::new(Mutex::new(None));
    let seen = aborted.clone();
    worker
        .on_abort(move |generation, _reason| {
            *seen.lock().unwrap() = Some((generation, thread::current().id() != main_thread));
        })
        .unwrap();
    let reconfigured_to = Arc::new(Mutex::new(0u64));
    let to = reconfigured_to.clone();
    worker.on_reconfigure(move |info| *to.lock().unwrap() = info.generation).unwrap();
    if info.generation != 1 {
        // Restarted rather than reconfigured: the test reports it.
        println!("rust-worker rank=0 restarted in generation {}", info.generation);
        return;
    }
    worker.store().unwrap().expect("a store under elasticrun").set("rank0-hooked", b"1").unwrap();
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut step = 0;
    loop {
        step += 1;
        worker.heartbeat(step).unwrap();
        if worker.poll().unwrap() == Poll::Reconfigured {
            break;
        }
        assert!(Instant::now() < deadline, "no reconfiguration in 150 s");
        thread::sleep(Duration::from_millis(10));
    }
    let (generation, other_thread) = aborted.lock().unwrap().expect("the abort hook ran before poll reconfigured");
    let info = worker.info().unwrap();
    println!(
        "rust-worker rank=0 survived abort-hook-generation={generation} hook-on-other-thread={other_thread} \
         reconfigured-to={} info-generation={} pid={}",
        *reconfigured_to.lock().unwrap(),
        info.generation,
        std::process::id()
    );
}
