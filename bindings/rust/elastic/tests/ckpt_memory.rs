//! The memory tier through the safe wrapper: `Checkpoint::open_memory` in a
//! tier (made here as the agent would, docs/CHECKPOINT.md), `restore` picks
//! the newer tier (memory on a tie).

use std::fs;

#[test]
fn memory_tier_saves_and_restore_prefers_it_on_a_tie() {
    let root = std::env::temp_dir().join(format!("elastic-rust-tier-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("own")).unwrap();
    fs::create_dir_all(root.join("peer")).unwrap();
    fs::write(root.join(".elastic-memory-tier"), "elastic-memory-tier 1\nlimit 67108864\nsteps 2\n").unwrap();
    std::env::set_var("ELASTIC_MEMORY_CKPT_DIR", root.join("own"));
    std::env::remove_var("ELASTIC_RESTORE_STEP");
    std::env::remove_var("ELASTIC_RESTORE_SOURCE");
    let disk_dir = root.join("disk");
    let mem = elastic::Checkpoint::open_memory(&Default::default()).unwrap().expect("a memory tier");
    let disk = elastic::Checkpoint::open(&disk_dir, &Default::default()).unwrap();
    assert!(elastic::restore(Some(&mem), Some(&disk)).unwrap().is_none());
    disk.save(4, &[elastic::Blob::new("x", b"disk")]).unwrap();
    mem.save(4, &[elastic::Blob::new("x", b"mem")]).unwrap();
    {
        let r = elastic::restore(Some(&mem), Some(&disk)).unwrap().unwrap();
        assert_eq!((r.step, r.source), (4, elastic::Source::Local));
        assert_eq!(r.checkpoint().read(r.step, "x").unwrap(), b"mem");
    }
    disk.save(6, &[elastic::Blob::new("x", b"newer")]).unwrap();
    let r = elastic::restore(Some(&mem), Some(&disk)).unwrap().unwrap();
    assert_eq!((r.step, r.source), (6, elastic::Source::Disk));
    drop(r);
    drop(mem);
    drop(disk);
    std::env::remove_var("ELASTIC_MEMORY_CKPT_DIR");
    assert!(elastic::Checkpoint::open_memory(&Default::default()).unwrap().is_none());
    fs::remove_dir_all(&root).unwrap();
}
