//! The safe API against a real store server and real checkpoint directories:
//! what the handles promise beyond the doc examples (threads, errors,
//! transactions, the asynchronous save).
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use elastic::{code, Blob, Checkpoint, CheckpointOptions, Store, StoreOptions, StoreServer, StoreServerOptions, Timeout};

/// The handles are Send/Sync exactly where include/elastic/*.h promises
/// (the refusals are compile_fail examples in the crate documentation).
#[test]
fn handles_are_send_and_sync_where_the_headers_promise() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<StoreServer>();
    send_sync::<Store>();
    send_sync::<Checkpoint<'static>>();
    send_sync::<elastic::Rendezvous<'static>>();
    send_sync::<elastic::Error>();
    send::<elastic::Worker>();
    send::<elastic::Transaction<'static>>();
}

fn server_and_store() -> (StoreServer, Store) {
    let server = StoreServer::start(&Default::default()).expect("store server");
    let store = Store::connect(&server.endpoint().unwrap(), &Default::default()).expect("connect");
    (server, store)
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("elastic-rust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn one_store_handle_serves_a_blocked_get_and_a_set_from_two_threads() {
    let (_server, store) = server_and_store();
    let (started, is_started) = mpsc::channel();
    let shared = &store;
    thread::scope(|scope| {
        let waiter = scope.spawn(move || {
            started.send(()).unwrap();
            shared.get("late", Duration::from_secs(30).into())
        });
        is_started.recv().unwrap();
        // The set goes through the same handle while the get is parked on it.
        store.set("late", b"here").unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), b"here");
    });
}

#[test]
fn a_store_handle_moves_to_and_is_shared_with_other_threads() {
    let (_server, store) = server_and_store();
    let store = std::sync::Arc::new(store);
    let adders: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || (0..25).for_each(|_| {
                store.add("n", 1).unwrap();
            }))
        })
        .collect();
    adders.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(store.add("n", 0).unwrap(), 100);
}

#[test]
fn errors_carry_code_name_and_the_librarys_detail() {
    let mut options = StoreOptions::default();
    options.connect_timeout = Some(Timeout::After(Duration::from_millis(300)));
    let error = Store::connect("127.0.0.1:1", &options).unwrap_err();
    assert_eq!((error.code, error.name), (code::ECONNECT, "ELASTIC_ECONNECT"));
    assert!(error.detail.contains("127.0.0.1:1"), "detail: {:?}", error.detail);
    assert!(error.to_string().starts_with("ELASTIC_ECONNECT: "), "{error}");
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(error);
    assert!(boxed.to_string().contains("127.0.0.1:1"));
}

#[test]
fn a_nul_in_a_key_is_einval_before_the_library_is_called() {
    let (_server, store) = server_and_store();
    let error = store.set("bad\0key", b"v").unwrap_err();
    assert_eq!(error.code, code::EINVAL);
    assert!(error.detail.contains("key"), "{error}");
}

#[test]
fn a_store_timeout_waits_about_as_long_as_asked() {
    let (_server, store) = server_and_store();
    let start = Instant::now();
    let error = store.get("never", Duration::from_millis(200).into()).unwrap_err();
    assert_eq!(error.code, code::ETIMEDOUT);
    assert!(start.elapsed() >= Duration::from_millis(190), "returned after {:?}", start.elapsed());
    // Zero does not wait; the handle's default (here 300 ms) applies to Timeout::Default.
    assert_eq!(store.get("never", Timeout::After(Duration::ZERO)).unwrap_err().code, code::ETIMEDOUT);
    let mut options = StoreOptions::default();
    options.timeout = Some(Duration::from_millis(300).into());
    let short = Store::connect(&_server.endpoint().unwrap(), &options).unwrap();
    let start = Instant::now();
    assert_eq!(short.get("never", Timeout::Default).unwrap_err().code, code::ETIMEDOUT);
    assert!(start.elapsed() >= Duration::from_millis(290), "returned after {:?}", start.elapsed());
}

#[test]
fn a_token_server_refuses_clients_without_it() {
    let mut options = StoreServerOptions::default();
    options.token = Some("right".into());
    let server = StoreServer::start(&options).unwrap();
    let mut client = StoreOptions::default();
    client.token = Some("wrong".into());
    client.connect_timeout = Some(Duration::from_secs(5).into());
    let refused = Store::connect(&server.endpoint().unwrap(), &client).and_then(|s| s.set("k", b"v"));
    assert_eq!(refused.unwrap_err().code, code::EAUTH);
    client.token = Some("right".into());
    Store::connect(&server.endpoint().unwrap(), &client).unwrap().set("k", b"v").unwrap();
}

#[test]
fn scoped_handles_see_their_own_key_space() {
    let (_server, store) = server_and_store();
    let a = store.scoped("a/").unwrap();
    let b = store.scoped("b/").unwrap();
    a.set("x", b"1").unwrap();
    assert_eq!(b.try_get("x").unwrap(), None);
    assert_eq!(store.keys("", 10).unwrap(), vec!["a/x".to_string()]);
    drop(store); // a clone outlives the handle it came from
    assert_eq!(a.try_get("x").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn a_dropped_transaction_is_aborted_and_one_is_open_at_a_time() {
    let dir = temp_dir("txn");
    let ckpt = Checkpoint::open(&dir, &Default::default()).unwrap();
    let mut txn = ckpt.begin(1).unwrap();
    txn.put("a", b"1").unwrap();
    assert_eq!(ckpt.begin(2).unwrap_err().code, code::EBUSY);
    drop(txn);
    assert_eq!(ckpt.latest().unwrap(), None);
    let mut txn = ckpt.begin(2).unwrap();
    txn.put("a", b"2").unwrap();
    txn.commit().unwrap();
    assert_eq!((ckpt.latest().unwrap(), ckpt.read(2, "a").unwrap()), (Some(2), b"2".to_vec()));
    drop(ckpt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_async_save_copies_its_blobs_and_reports_its_own_step() {
    let dir = temp_dir("async");
    let mut options = CheckpointOptions::default();
    options.fsync = Some(false);
    let mut ckpt = Checkpoint::open(&dir, &options).unwrap();
    let mut weights = vec![7u8; 3 << 20];
    for step in 1..=3u64 {
        let save = ckpt.save_async(step, &[Blob::new("w", &weights).replicated()], Timeout::NoLimit).unwrap();
        weights.iter_mut().for_each(|b| *b = b.wrapping_add(1)); // the next step's state, while saving
        assert_eq!(save.wait(Timeout::NoLimit).unwrap(), step);
    }
    assert_eq!(ckpt.steps().unwrap(), vec![1, 2, 3]);
    let saved = ckpt.read(3, "w").unwrap();
    assert!(saved.len() == 3 << 20 && saved.iter().all(|&b| b == 9), "step 3 holds what was passed at step 3");
    drop(ckpt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_handle_is_used_from_several_threads() {
    let dir = temp_dir("threads");
    let ckpt = Checkpoint::open(&dir, &Default::default()).unwrap();
    ckpt.save(1, &[Blob::new("x", b"one")]).unwrap();
    thread::scope(|scope| {
        let readers: Vec<_> = (0..3).map(|_| scope.spawn(|| ckpt.read(1, "x").unwrap())).collect();
        readers.into_iter().for_each(|r| assert_eq!(r.join().unwrap(), b"one"));
    });
    drop(ckpt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_commits_through_a_borrowed_store() {
    let (_server, store) = server_and_store();
    let dir = temp_dir("store-commit");
    let mut options = CheckpointOptions::default();
    options.store = Some(&store);
    options.commit_timeout = Some(Duration::from_secs(30).into());
    let ckpt = Checkpoint::open(&dir, &options).unwrap();
    ckpt.save(4, &[Blob::new("x", b"4")]).unwrap();
    assert_eq!(ckpt.latest().unwrap(), Some(4));
    assert!(store.num_keys().unwrap() > 0, "the commit record went through the store");
    drop(ckpt);
    std::fs::remove_dir_all(&dir).unwrap();
}
