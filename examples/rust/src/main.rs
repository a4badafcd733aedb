//! The elastic demo's toy data-parallel trainer in Rust, on the safe `elastic`
//! crate: the same model, data, reduction order and checkpoints as
//! examples/c/demo_trainer.c, so both print the same final line.
//!
//! Linear regression on synthetic data. Each rank computes the gradient of
//! its share of every step's global batch; the ranks average them through
//! the job's store (the worker's generation-scoped store, summed in rank
//! order, so the result is bitwise reproducible), heartbeat every step, and
//! save the state every few steps with the atomic checkpoint store; after a
//! restart every rank resumes from the newest committed step.
//!
//!   demo_trainer --ckpt-dir DIR [--steps 300] [--ckpt-every 10] [--step-ms 10] [--result FILE]
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use elastic::{Blob, Checkpoint, CheckpointOptions, Compression, Store, Worker};

const DIM: usize = 8;
const GLOBAL_BATCH: usize = 64;
const LEARNING_RATE: f64 = 0.05;
const REDUCE_TIMEOUT: Duration = Duration::from_secs(60);
/// The checkpointed state: `step` then the weights, as the C trainer's struct.
const STATE_BYTES: usize = 8 + 8 * DIM;

struct Args {
    ckpt_dir: Option<String>,
    result: Option<String>,
    steps: u64,
    ckpt_every: u64,
    step_ms: u64,
}

#[derive(Clone, Default)]
struct State {
    step: u64,
    weights: [f64; DIM],
}

/// splitmix64: the data of step s, sample i is a pure function of (s, i).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

fn uniform(seed: u64) -> f64 {
    (mix(seed) >> 11) as f64 / 9007199254740992.0 * 2.0 - 1.0
}

fn sample(step: u64, index: usize) -> ([f64; DIM], f64) {
    const TRUTH: [f64; DIM] = [0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 0.25];
    let mut x = [0.0; DIM];
    let mut y = 0.1;
    for d in 0..DIM {
        let seed = step.wrapping_mul(1000003).wrapping_add((index as u64).wrapping_mul(131)).wrapping_add(d as u64);
        x[d] = uniform(seed);
        y += TRUTH[d] * x[d];
    }
    (x, y)
}

/// This rank's share of the step's batch: samples index % world == rank, one
/// row of DIM + 1 values per sample (the last slot is the squared error, for
/// the loss). Rows, not their sum: the reduction adds them in sample order,
/// so the step's gradient is the same bits at any world size, and the same
/// as the C trainer's.
fn partial_gradient(s: &State, rank: usize, world: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for i in (rank..GLOBAL_BATCH).step_by(world) {
        let (x, y) = sample(s.step, i);
        let mut prediction = 0.0;
        for d in 0..DIM {
            prediction += s.weights[d] * x[d];
        }
        let error = prediction - y;
        for d in 0..DIM {
            out.push(2.0 * error * x[d]);
        }
        out.push(error * error);
    }
    out
}

fn to_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn rows_of(rank: usize, world: usize) -> usize {
    if rank < GLOBAL_BATCH { (GLOBAL_BATCH - 1 - rank) / world + 1 } else { 0 }
}

fn all_reduce(store: &Store, step: u64, rank: usize, world: usize, rows: &[f64]) -> elastic::Result<[f64; DIM + 1]> {
    store.set(&format!("step/{step}/grad/{rank}"), &to_bytes(rows))?;
    let mut all = vec![[0.0; DIM + 1]; GLOBAL_BATCH]; // every sample's row, by sample index
    for peer in 0..world.min(GLOBAL_BATCH) {
        let theirs = store.get(&format!("step/{step}/grad/{peer}"), REDUCE_TIMEOUT.into())?;
        if theirs.len() != 8 * (DIM + 1) * rows_of(peer, world) {
            return Err(elastic::Error::new(elastic::code::EPROTO, format!("rank {peer} sent {} bytes", theirs.len())));
        }
        for (row, bytes) in theirs.chunks_exact(8 * (DIM + 1)).enumerate() {
            for (d, chunk) in bytes.chunks_exact(8).enumerate() {
                all[peer + row * world][d] = f64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            }
        }
    }
    let mut grad = [0.0; DIM + 1];
    for sample_row in &all {
        // In sample order: the same sums on every rank, at any world size.
        for d in 0..=DIM {
            grad[d] += sample_row[d];
        }
    }
    for d in 0..=DIM {
        grad[d] /= GLOBAL_BATCH as f64;
    }
    Ok(grad)
}

// ---- checkpoint: the library's atomic checkpoint store ----------------------
// Every rank takes part in each save (the step is committed once all ranks
// did); the state is the same on every rank, so it is one replicated blob.

fn encode(s: &State) -> Vec<u8> {
    let mut bytes = s.step.to_ne_bytes().to_vec();
    bytes.extend(to_bytes(&s.weights));
    bytes
}

fn load_state(ckpt: &Checkpoint<'_>) -> elastic::Result<State> {
    let step = match ckpt.latest()? {
        None => return Ok(State::default()), // a fresh start
        Some(step) => step,
    };
    let bytes = ckpt.read(step, "state")?;
    let corrupt = || elastic::Error::new(elastic::code::ECORRUPT, format!("step {step}: the state blob is malformed"));
    if bytes.len() != STATE_BYTES {
        return Err(corrupt());
    }
    let mut s = State { step: u64::from_ne_bytes(bytes[..8].try_into().expect("8 bytes")), weights: [0.0; DIM] };
    for (d, chunk) in bytes[8..].chunks_exact(8).enumerate() {
        s.weights[d] = f64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
    }
    if s.step != step {
        return Err(corrupt());
    }
    Ok(s)
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

fn write_result(path: Option<&str>, s: &State, loss: f64) -> std::io::Result<()> {
    let digest = s.weights.iter().fold(0u64, |digest, w| mix(digest ^ w.to_bits()));
    let line = format!("steps={} loss={} weights={digest:016x}\n", s.step, format_g(loss, 12));
    print!("{line}");
    match path {
        Some(path) => std::fs::write(path, line),
        None => Ok(()),
    }
}

// ---- main ---------------------------------------------------------------------

fn parse_args() -> Args {
    let mut args = Args { ckpt_dir: None, result: None, steps: 300, ckpt_every: 10, step_ms: 10 };
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks_exact(2) {
        let number = || pair[1].parse::<u64>().unwrap_or(0);
        match pair[0].as_str() {
            "--ckpt-dir" => args.ckpt_dir = Some(pair[1].clone()),
            "--result" => args.result = Some(pair[1].clone()),
            "--steps" => args.steps = number(),
            "--ckpt-every" => args.ckpt_every = number().max(1),
            "--step-ms" => args.step_ms = number(),
            _ => {}
        }
    }
    args
}

fn run(args: &Args, ckpt_dir: &str) -> Result<(), String> {
    let mut worker = Worker::init(&Default::default()).map_err(|e| format!("attaching to the agent: {e}"))?;
    let info = worker.info().map_err(|e| e.to_string())?;
    let (rank, world) = (info.rank as usize, info.world_size as usize);
    let mut options = CheckpointOptions::default();
    options.compression = Some(Compression::None);
    options.threads = Some(1);
    options.keep_last = Some(3);
    options.rank = Some(info.rank as u32);
    options.world = Some(info.world_size as u32);
    options.generation = Some(info.generation);
    let ckpt = Checkpoint::open(ckpt_dir, &options).map_err(|e| format!("checkpoints in {ckpt_dir}: {e}"))?;
    let mut s = load_state(&ckpt).map_err(|e| format!("checkpoints in {ckpt_dir}: {e}"))?;
    if rank == 0 {
        println!("{} at step {}", if s.step > 0 { "resumed" } else { "started" }, s.step);
    }
    flush();
    let mut loss = 0.0;
    while s.step < args.steps {
        let rows = partial_gradient(&s, rank, world);
        let grad = {
            // This generation's key space: a restarted group starts clean.
            let store = worker.store().map_err(|e| e.to_string())?.ok_or("no store: run me under elasticrun")?;
            all_reduce(&store, s.step, rank, world, &rows).map_err(|e| format!("rank {rank} step {}: {e}", s.step))?
        };
        for d in 0..DIM {
            s.weights[d] -= LEARNING_RATE * grad[d];
        }
        loss = grad[DIM];
        s.step += 1;
        worker.heartbeat(s.step).map_err(|e| e.to_string())?;
        if s.step % args.ckpt_every == 0 {
            let state = encode(&s);
            ckpt.save(s.step, &[Blob::new("state", &state).replicated()])
                .map_err(|e| format!("rank {rank} checkpoint {}: {e}", s.step))?;
            if rank == 0 {
                println!("step {} loss {loss:.6} (checkpoint)", s.step);
            }
            flush();
        }
        if args.step_ms > 0 {
            std::thread::sleep(Duration::from_millis(args.step_ms));
        }
    }
    if rank == 0 {
        write_result(args.result.as_deref(), &s, loss).map_err(|e| format!("writing the result: {e}"))?;
    }
    Ok(())
}

fn flush() {
    let _ = std::io::stdout().flush();
}

fn main() -> ExitCode {
    let args = parse_args();
    let ckpt_dir = match args.ckpt_dir.clone() {
        Some(dir) => dir,
        None => {
            eprintln!("demo_trainer: run me under elasticrun with --ckpt-dir DIR");
            return ExitCode::from(2);
        }
    };
    match run(&args, &ckpt_dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("demo_trainer: {message}");
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
