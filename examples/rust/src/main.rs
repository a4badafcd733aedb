//! The elastic demo's toy data-parallel trainer in Rust, on the safe `elastic`
//! crate's training loop ([`elastic::run_loop`]): this file is the training
//! logic only. The same model, data, reduction order and checkpoints as
//! examples/c/demo_trainer.c, so both print the same final line.
//!
//! Linear regression on synthetic data. Each rank computes the gradient of
//! its share of every step's global batch; the ranks average them through
//! the job's store (the worker's generation-scoped store, summed in sample
//! order, so the result is bitwise reproducible at any world size). The loop
//! parks a warm spare, restores the job's agreed step from the cheapest tier,
//! heartbeats, saves to memory every `--memory-every` steps (elasticrun
//! `--memory-ckpt`) and to disk every `--ckpt-every`, and after a peer's death
//! (`--in-process-recovery`) reloads and goes on in the same process.
//!
//!   demo_trainer --ckpt-dir DIR [--steps 300] [--ckpt-every 10] [--memory-every 0]
//!                [--step-ms 10] [--result FILE]
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use elastic::{code, Blob, Checkpoint, Error, LoopOptions, Poll, Source, Trainer, Worker, WorkerInfo};

const DIM: usize = 8;
const GLOBAL_BATCH: usize = 64;
const LEARNING_RATE: f64 = 0.05;
const REDUCE_TIMEOUT: Duration = Duration::from_secs(60);
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// The checkpointed state: `step` then the weights, as the C trainer's struct.
#[derive(Default)]
struct Demo {
    step: u64,
    weights: [f64; DIM],
    loss: f64,
    rank: usize,
    world: usize,
    step_ms: u64,
    bytes: Vec<u8>,
}

/// splitmix64: the data of step s, sample i is a pure function of (s, i).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

fn sample(step: u64, index: usize) -> ([f64; DIM], f64) {
    const TRUTH: [f64; DIM] = [0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 0.25];
    let (mut x, mut y) = ([0.0; DIM], 0.1);
    for d in 0..DIM {
        let seed = step.wrapping_mul(1000003).wrapping_add((index as u64).wrapping_mul(131)).wrapping_add(d as u64);
        x[d] = (mix(seed) >> 11) as f64 / 9007199254740992.0 * 2.0 - 1.0;
        y += TRUTH[d] * x[d];
    }
    (x, y)
}

/// This rank's rows (samples index % world == rank): DIM gradient values and
/// the squared error each, summed later in sample order by every rank.
fn rows(d: &Demo) -> Vec<u8> {
    let mut out = Vec::new();
    for i in (d.rank..GLOBAL_BATCH).step_by(d.world) {
        let (x, y) = sample(d.step, i);
        let error = (0..DIM).map(|k| d.weights[k] * x[k]).sum::<f64>() - y;
        let row = (0..DIM).map(|k| 2.0 * error * x[k]).chain(std::iter::once(error * error));
        out.extend(row.flat_map(f64::to_ne_bytes));
    }
    out
}

/// A peer's rows, waiting in slices so that a generation's end stops the wait
/// (the loop then reloads: `ERECONFIGURE` from the step).
fn get_rows(worker: &mut Worker, key: &str) -> elastic::Result<Vec<u8>> {
    let started = Instant::now();
    loop {
        let found = worker.store()?.ok_or_else(|| Error::new(code::EUNSUPPORTED, "no store"))?.get(key, WAIT_SLICE.into());
        match found {
            Err(e) if e.code == code::ETIMEDOUT && started.elapsed() < REDUCE_TIMEOUT => {}
            other => return other,
        }
        if worker.poll()? == Poll::Reconfigured {
            return Err(Error::new(code::ERECONFIGURE, "the generation ended during the all-reduce"));
        }
    }
}

fn all_reduce(d: &Demo, worker: &mut Worker) -> elastic::Result<[f64; DIM + 1]> {
    let store = worker.store()?.ok_or_else(|| Error::new(code::EUNSUPPORTED, "no store: run me under elasticrun"))?;
    store.set(&format!("step/{}/grad/{}", d.step, d.rank), &rows(d))?;
    drop(store); // the generation's key space: not held across poll
    let mut all = vec![[0.0; DIM + 1]; GLOBAL_BATCH]; // every sample's row, by sample index
    for peer in 0..d.world.min(GLOBAL_BATCH) {
        let theirs = get_rows(worker, &format!("step/{}/grad/{peer}", d.step))?;
        let want = 8 * (DIM + 1) * ((GLOBAL_BATCH - 1 - peer) / d.world + 1);
        if theirs.len() != want {
            return Err(Error::new(code::EPROTO, format!("rank {peer} sent {} bytes", theirs.len())));
        }
        for (row, bytes) in theirs.chunks_exact(8 * (DIM + 1)).enumerate() {
            for (k, chunk) in bytes.chunks_exact(8).enumerate() {
                all[peer + row * d.world][k] = f64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            }
        }
    }
    let mut grad = [0.0; DIM + 1];
    for sample_row in &all {
        for k in 0..=DIM {
            grad[k] += sample_row[k]; // in sample order: the same sums at any world size
        }
    }
    Ok(grad.map(|g| g / GLOBAL_BATCH as f64))
}

impl Trainer for Demo {
    fn build(&mut self, _: &mut Worker, info: &WorkerInfo) -> elastic::Result<()> {
        (self.rank, self.world) = (info.rank as usize, info.world_size as usize);
        if self.rank == 0 {
            println!("{} at step {}", if self.step > 0 { "resumed" } else { "started" }, self.step);
        }
        flush();
        Ok(())
    }

    fn step(&mut self, worker: &mut Worker, _: u64) -> elastic::Result<()> {
        let grad = all_reduce(self, worker)?;
        for k in 0..DIM {
            self.weights[k] -= LEARNING_RATE * grad[k];
        }
        (self.loss, self.step) = (grad[DIM], self.step + 1);
        std::thread::sleep(Duration::from_millis(self.step_ms));
        Ok(())
    }

    fn save(&mut self, step: u64, tier: Source) -> elastic::Result<Vec<Blob<'_>>> {
        if tier == Source::Disk && self.rank == 0 {
            println!("step {step} loss {:.6} (checkpoint)", self.loss);
            flush();
        }
        self.bytes = self.step.to_ne_bytes().into_iter().chain(self.weights.iter().flat_map(|w| w.to_ne_bytes())).collect();
        Ok(vec![Blob::new("state", &self.bytes).replicated()])
    }

    fn load(&mut self, from: Option<&Checkpoint<'_>>, step: u64) -> elastic::Result<()> {
        (self.step, self.weights) = (0, [0.0; DIM]);
        let bytes = match from {
            None => return Ok(()), // a fresh start
            Some(ckpt) => ckpt.read(step, "state")?,
        };
        if bytes.len() != 8 + 8 * DIM || bytes[..8] != step.to_ne_bytes() {
            return Err(Error::new(code::ECORRUPT, format!("step {step}: the state blob is malformed")));
        }
        for (k, chunk) in bytes[8..].chunks_exact(8).enumerate() {
            self.weights[k] = f64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
        }
        self.step = step;
        Ok(())
    }
}

// ---- output -------------------------------------------------------------------

/// printf's `%.<precision>g`, so the result line is the C trainer's byte for byte.
fn format_g(value: f64, precision: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let scientific = format!("{:.*e}", precision - 1, value);
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent");
    if exponent < -4 || exponent >= precision as i32 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), exponent.abs())
    } else {
        strip_zeros(&format!("{:.*}", (precision as i32 - 1 - exponent) as usize, value)).to_string()
    }
}

fn strip_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

fn write_result(path: Option<&str>, d: &Demo) -> std::io::Result<()> {
    let digest = d.weights.iter().fold(0u64, |digest, w| mix(digest ^ w.to_bits()));
    let line = format!("steps={} loss={} weights={digest:016x}\n", d.step, format_g(d.loss, 12));
    print!("{line}");
    path.map_or(Ok(()), |path| std::fs::write(path, line))
}

fn flush() {
    let _ = std::io::stdout().flush();
}

// ---- main ---------------------------------------------------------------------

fn main() -> ExitCode {
    let mut options = LoopOptions::new(300);
    options.disk_every = Some(10);
    options.memory_every = Some(0);
    let (mut demo, mut result) = (Demo { step_ms: 10, ..Default::default() }, None);
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks_exact(2) {
        let number = || pair[1].parse::<u64>().unwrap_or(0);
        match pair[0].as_str() {
            "--ckpt-dir" => options.dir = Some(pair[1].clone().into()),
            "--result" => result = Some(pair[1].clone()),
            "--steps" => options.steps = number(),
            "--ckpt-every" => options.disk_every = Some(number().max(1)),
            "--memory-every" => options.memory_every = Some(number()),
            "--step-ms" => demo.step_ms = number(),
            _ => {}
        }
    }
    if options.dir.is_none() {
        eprintln!("demo_trainer: run me under elasticrun with --ckpt-dir DIR");
        return ExitCode::from(2);
    }
    match elastic::run_loop(&mut demo, &options) {
        Ok(done) if done.released => ExitCode::SUCCESS, // a warm spare the job did not need
        Ok(done) => {
            if done.rank == 0 {
                if let Err(e) = write_result(result.as_deref(), &demo) {
                    eprintln!("demo_trainer: writing the result: {e}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("demo_trainer: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn format_g_matches_printf() {
        assert_eq!(format_g(0.000123456789012345, 12), "0.000123456789012");
        assert_eq!(format_g(1.5e-7, 12), "1.5e-07");
        assert_eq!(format_g(2.0, 12), "2");
        assert_eq!(format_g(123456789012345.0, 12), "1.23456789012e+14");
        assert_eq!(format_g(0.1, 12), "0.1");
    }
}
