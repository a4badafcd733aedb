//! The generated structs against the C compiler's layout: test/abi/layout
//! (built by `make test`, found through ELASTIC_ABI_DIR) prints each public
//! struct's size and each field's offset and size as gcc lays them out;
//! every line must match what bindgen's declarations give in Rust. (bindgen's
//! own layout tests compare with clang's view at generation time; this one
//! checks the library's compiler.)
use std::collections::HashMap;
use std::mem::{size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

use elastic_sys::*;

/// Size of a field's type, from a raw pointer to it (no read happens).
fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// ("type field" or "type sizeof") -> (offset, size) of the Rust declarations.
macro_rules! layouts {
    ($($ty:ident: $($field:ident),+;)+) => {{
        let mut table: HashMap<String, (usize, usize)> = HashMap::new();
        $(
            table.insert(format!("{} sizeof", stringify!($ty)), (0, size_of::<$ty>()));
            $({
                let value = MaybeUninit::<$ty>::uninit();
                let base = value.as_ptr();
                // SAFETY: only the field's address is computed; nothing is read.
                let field = unsafe { std::ptr::addr_of!((*base).$field) };
                let offset = field as usize - base as usize;
                table.insert(format!("{} {}", stringify!($ty), stringify!($field)), (offset, size_of_pointee(field)));
            })+
        )+
        table
    }};
}

fn rust_layouts() -> HashMap<String, (usize, usize)> {
    layouts! {
        elastic_store_server_opts: struct_size, host, port, token, max_key_bytes, max_value_bytes, max_connections,
            max_connection_buffer, max_total_bytes, handshake_timeout_ms, idle_timeout_ms, max_pending_waits,
            max_buffered_bytes, frame_timeout_ms;
        elastic_store_opts: struct_size, prefix, token, connect_timeout_ms, timeout_ms;
        elastic_rdzv_opts: struct_size, run_id, endpoint, store, token, min_nodes, max_nodes, join_timeout_ms,
            last_call_timeout_ms, keepalive_interval_ms, keepalive_timeout_ms, max_restarts, node_addr,
            local_world_size, node_id, backend, etcd_endpoints, etcd_prefix, etcd_ca_file, etcd_cert_file,
            etcd_key_file, etcd_user, etcd_password, etcd_timeout_ms, preferred_rank,
            max_infra_restarts;
        elastic_rdzv_result: struct_size, generation, group_rank, group_world_size, rank_base, local_world_size,
            world_size, restart_count, max_restarts, master_addr, master_port, incarnation;
        elastic_rdzv_cause: struct_size, kind, generation, node_id, rank, exit_code, signal, reason, time_ms;
        elastic_worker_opts: struct_size, store_connect_timeout_ms, store_timeout_ms, reconfigure_timeout_ms,
            stack_dump_signal;
        elastic_worker_info: struct_size, rank, local_rank, world_size, local_world_size, group_rank, restart_count,
            generation, master_port, attached, run_id, master_addr, incarnation;
        elastic_worker_park_opts: struct_size, timeout_ms;
        elastic_ckpt_opts: struct_size, compression, zstd_level, threads, chunk_bytes, fsync, verify, keep_last,
            keep_every, rank, world, generation, store, shared_storage, commit_timeout_ms, max_blob_bytes, file_mode, incarnation;
        elastic_ckpt_blob: name, data, len, flags;
    }
}

fn layout_program() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("ELASTIC_ABI_DIR") {
        return Some(PathBuf::from(dir).join("layout"));
    }
    let in_tree = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build/release/test/abi/layout");
    in_tree.exists().then(|| in_tree)
}

#[test]
fn generated_structs_match_the_c_compilers_layout() {
    let program = match layout_program() {
        Some(program) => program,
        None => {
            eprintln!("skipped: no test/abi/layout program (run `make test`, or set ELASTIC_ABI_DIR)");
            return;
        }
    };
    let output = Command::new(&program).output().unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    assert!(output.status.success(), "{} failed: {:?}", program.display(), output);
    let text = String::from_utf8(output.stdout).expect("layout prints ASCII");
    let rust = rust_layouts();
    let mut checked = 0;
    for line in text.lines() {
        // "type field offset size" or "type sizeof - size"
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.len(), 4, "malformed line from layout: {line:?}");
        let key = format!("{} {}", words[0], words[1]);
        let &(offset, size) = rust.get(&key).unwrap_or_else(|| panic!("{key} is not checked on the Rust side"));
        let c_size: usize = words[3].parse().expect("size");
        assert_eq!(size, c_size, "{key}: Rust size {size}, C size {c_size}");
        if words[1] != "sizeof" {
            let c_offset: usize = words[2].parse().expect("offset");
            assert_eq!(offset, c_offset, "{key}: Rust offset {offset}, C offset {c_offset}");
        }
        checked += 1;
    }
    assert!(checked >= 90, "layout printed only {checked} lines:\n{text}");
}
