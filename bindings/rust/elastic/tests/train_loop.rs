//! `elastic::run_loop` alone (a group of one, no launcher): it trains, saves
//! to its disk tier and starts again from the last disk step; a step that
//! fails with `ERECONFIGURE` is the trainer's error without an agent; the
//! trainer's own error (its detail) and a panic come back as `Err`, never
//! unwinding into C. The run under elasticrun with a SIGKILLed rank is
//! examples/rust/tests/demo.rs (demo.sh's runs 1 and 3).
use std::path::PathBuf;

use elastic::{code, Blob, Checkpoint, Error, LoopOptions, Source, Trainer, Worker, WorkerInfo};

#[derive(Default)]
struct Sum {
    total: u64,
    bytes: [u8; 8],
    fail_at: Option<(u64, i32)>,
    panic_at: Option<u64>,
    fresh_starts: u32,
    disk_saves: u32,
}

impl Trainer for Sum {
    fn build(&mut self, _: &mut Worker, info: &WorkerInfo) -> elastic::Result<()> {
        assert_eq!(info.world_size, 1);
        Ok(())
    }

    fn step(&mut self, _: &mut Worker, step: u64) -> elastic::Result<()> {
        if let Some((at, failure)) = self.fail_at {
            if at == step {
                return Err(Error::new(failure, format!("the trainer's own failure at step {step}")));
            }
        }
        if self.panic_at == Some(step) {
            panic!("a bug in the step");
        }
        self.total += step + 1;
        Ok(())
    }

    fn save(&mut self, _: u64, tier: Source) -> elastic::Result<Vec<Blob<'_>>> {
        if tier == Source::Disk {
            self.disk_saves += 1;
        }
        self.bytes = self.total.to_le_bytes();
        Ok(vec![Blob::new("total", &self.bytes).replicated()])
    }

    fn load(&mut self, from: Option<&Checkpoint<'_>>, step: u64) -> elastic::Result<()> {
        self.total = match from {
            Some(ckpt) => u64::from_le_bytes(ckpt.read(step, "total")?.try_into().expect("8 bytes")),
            None => {
                self.fresh_starts += 1;
                0
            }
        };
        Ok(())
    }
}

fn options(steps: u64, dir: Option<PathBuf>) -> LoopOptions {
    let mut options = LoopOptions::new(steps);
    options.dir = dir;
    options.disk_every = Some(4);
    options
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("elastic-rust-loop-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn alone_it_trains_saves_and_starts_again_from_disk() {
    let dir = temp_dir("disk");
    let mut sum = Sum::default();
    let done = elastic::run_loop(&mut sum, &options(10, Some(dir.clone()))).expect("first run");
    assert_eq!((done.steps, done.world_size, done.recoveries, done.released), (10, 1, 0, false));
    assert_eq!((sum.total, sum.fresh_starts, sum.disk_saves), (55, 1, 2));
    assert_eq!(done.restored, None);
    let mut again = Sum::default();
    let done = elastic::run_loop(&mut again, &options(12, Some(dir.clone()))).expect("second run");
    // From disk step 8 (saves at 4 and 8), where the total was 36.
    assert_eq!(done.restored, Some(Source::Disk));
    assert_eq!((again.total, again.fresh_starts), (36 + 9 + 10 + 11 + 12, 0));
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn alone_a_failed_step_is_the_trainers_error() {
    let mut sum = Sum { fail_at: Some((3, code::ERECONFIGURE)), ..Default::default() };
    let error = elastic::run_loop(&mut sum, &options(10, None)).unwrap_err();
    assert_eq!(error.code, code::EUNSUPPORTED, "{error}");
    assert!(error.detail.contains("--in-process-recovery"), "{error}");
    let mut sum = Sum { fail_at: Some((2, code::EIO)), ..Default::default() };
    let error = elastic::run_loop(&mut sum, &options(10, None)).unwrap_err();
    assert_eq!(error.code, code::EIO);
    assert_eq!(error.detail, "the trainer's own failure at step 2");
}

#[test]
fn a_panic_in_the_trainer_is_an_error_not_an_abort() {
    let mut sum = Sum { panic_at: Some(1), ..Default::default() };
    let error = elastic::run_loop(&mut sum, &options(10, None)).unwrap_err();
    assert!(error.detail.contains("step panicked"), "{error}");
}

#[test]
fn no_steps_is_refused_before_anything_runs() {
    let mut sum = Sum::default();
    let error = elastic::run_loop(&mut sum, &options(0, None)).unwrap_err();
    assert_eq!(error.code, code::EINVAL);
    assert!(error.detail.contains("elastic_loop_opts.steps"), "{error}");
    assert_eq!(sum.fresh_starts, 0);
}
