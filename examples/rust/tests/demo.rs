//! The elastic demo (examples/demo.sh) with this trainer: a worker is
//! SIGKILLed midway, the group resumes from the memory tier, again in place
//! with a warm spare, the final line equals a run without the failure's, and
//! it equals the C trainer's.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin_dir() -> PathBuf {
    std::env::var_os("ELASTIC_BIN_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("bin"))
}

/// Runs demo.sh with `trainer` for `steps` steps; returns its output (it must succeed).
fn run_demo(trainer: &Path, steps: u32) -> String {
    let mut child = Command::new("bash")
        .arg(root().join("examples/demo.sh"))
        .env("ELASTIC_BIN_DIR", bin_dir())
        .env("DEMO_TRAINER", trainer)
        .env("DEMO_STEPS", steps.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start demo.sh");
    let deadline = Instant::now() + Duration::from_secs(240);
    while child.try_wait().expect("wait for demo.sh").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill(); // demo.sh's elasticrun dies with it (PDEATHSIG on workers)
            let output = child.wait_with_output().expect("demo.sh output");
            panic!("demo.sh did not finish in 240 s:\n{}", String::from_utf8_lossy(&output.stdout));
        }
        thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("demo.sh output");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "demo.sh with {} failed:\n{text}", trainer.display());
    text
}

/// The "finished: steps=... loss=... weights=..." of the run without the failure.
fn clean_result(output: &str) -> &str {
    let after = output.split("run 2: the same job without the failure").nth(1).expect("run 2 in the output");
    after.lines().find_map(|l| l.trim().strip_prefix("finished: ")).expect("a finished line")
}

#[test]
fn the_demo_survives_the_kill_with_the_same_result_as_the_c_trainer() {
    let rust = PathBuf::from(env!("CARGO_BIN_EXE_demo_trainer"));
    let output = run_demo(&rust, 60);
    assert!(output.contains("killing rank 2"), "{output}");
    // From memory, a few steps past the last disk checkpoint (elastic::run_loop's memory tier).
    assert!(output.contains("(the last disk checkpoint: step 30)"), "{output}");
    // In place, with a warm spare taking the killed rank (run 3 of demo.sh).
    assert!(output.contains("same final result with a warm spare: yes"), "{output}");
    assert!(output.contains("same final result with and without the failure: yes"), "{output}");
    let c_trainer = std::env::var_os("ELASTIC_EXAMPLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("build/release/examples"))
        .join("demo_trainer");
    if !c_trainer.exists() {
        eprintln!("not compared with the C trainer: {} is missing (run make)", c_trainer.display());
        return;
    }
    let c_output = run_demo(&c_trainer, 60);
    assert_eq!(clean_result(&output), clean_result(&c_output), "Rust:\n{output}\nC:\n{c_output}");
}
