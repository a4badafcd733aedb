// Build script of the Rust demo trainer: for an in-tree build (ELASTIC_LIB_DIR)
// the binary records that directory as its run-time library path, so that
// elasticrun can start it without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=ELASTIC_LIB_DIR");
    if let Some(dir) = std::env::var_os("ELASTIC_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", std::path::Path::new(&dir).display());
    }
}
