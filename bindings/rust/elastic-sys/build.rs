// Build script of elastic-sys: finds libelastic (ELASTIC_LIB_DIR for an
// in-tree build, else pkg-config's `elastic`), tells rustc to link it, and
// runs bindgen on include/elastic.h to generate the declarations.
use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=ELASTIC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=ELASTIC_INCLUDE_DIR");
    let include_dir = match env::var_os("ELASTIC_LIB_DIR") {
        Some(lib_dir) => link_in_tree(Path::new(&lib_dir)),
        None => link_installed(),
    };
    let include_dir = env::var_os("ELASTIC_INCLUDE_DIR").map(PathBuf::from).unwrap_or(include_dir);
    let header = include_dir.join("elastic.h");
    if !header.is_file() {
        panic!("elastic-sys: {} does not exist (set ELASTIC_INCLUDE_DIR)", header.display());
    }
    generate(&header, &include_dir);
}

/// The library of a source tree (`make` puts it in lib/ or build/asan/lib);
/// the headers are the tree's include/ unless ELASTIC_INCLUDE_DIR says otherwise.
fn link_in_tree(lib_dir: &Path) -> PathBuf {
    if !lib_dir.join("libelastic.so").exists() {
        panic!("elastic-sys: ELASTIC_LIB_DIR={} has no libelastic.so (run make)", lib_dir.display());
    }
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rerun-if-env-changed=ELASTIC_SANITIZER_RUNTIME");
    if env::var_os("ELASTIC_SANITIZER_RUNTIME").map_or(false, |r| r == "asan") {
        link_asan_runtime();
    }
    println!("cargo:rustc-link-lib=dylib=elastic");
    // Dependents' build scripts see it as DEP_ELASTIC_LIB_DIR.
    println!("cargo:lib_dir={}", lib_dir.display());
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    manifest.join("../../../include")
}

/// An ASan-built library (make check) needs the ASan runtime initialised
/// before anything else, as in a program compiled with -fsanitize=address:
/// every program that links elastic-sys (tests, doc tests, examples) gets
/// libasan as its first library and gcc's libasan_preinit.o (its
/// .preinit_array entry). Preloading the runtime instead, without the
/// preinit entry, deadlocks at exit in libp11-kit's destructor.
fn link_asan_runtime() {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let found = std::process::Command::new(&cc).arg("-print-file-name=libasan_preinit.o").output();
    let preinit = found.ok().map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string()));
    let preinit = match preinit {
        Some(path) if path.is_absolute() && path.is_file() => path,
        _ => panic!("elastic-sys: {cc} -print-file-name=libasan_preinit.o found no file (gcc's ASan runtime)"),
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let archive = out.join("libelastic_asan_preinit.a");
    let _ = std::fs::remove_file(&archive);
    let status = std::process::Command::new("ar").arg("rcs").arg(&archive).arg(&preinit).status();
    if !status.map_or(false, |s| s.success()) {
        panic!("elastic-sys: ar rcs {} {} failed", archive.display(), preinit.display());
    }
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static:-bundle,+whole-archive=elastic_asan_preinit");
    println!("cargo:rustc-link-lib=dylib=asan");
}

/// An installed library (`make install`): pkg-config's elastic.pc says where.
fn link_installed() -> PathBuf {
    let library = pkg_config::Config::new().atleast_version("1.0").probe("elastic").unwrap_or_else(|e| {
        panic!("elastic-sys: libelastic >= 1.0 not found through pkg-config ({e}); install it, or set ELASTIC_LIB_DIR")
    });
    if let Some(lib_dir) = library.link_paths.first() {
        println!("cargo:lib_dir={}", lib_dir.display());
    }
    library.include_paths.first().cloned().unwrap_or_else(|| PathBuf::from("/usr/include"))
}

fn generate(header: &Path, include_dir: &Path) {
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_function("elastic_.*")
        .allowlist_type("elastic_.*")
        .allowlist_var("ELASTIC_.*")
        // C enums become plain integer constants (ELASTIC_ETIMEDOUT), as in C.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .layout_tests(true)
        // The headers' comments are prose, not Rust: rustdoc would run their
        // indented lines as doc tests.
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks))
        .generate()
        .unwrap_or_else(|e| panic!("elastic-sys: bindgen failed on {}: {e:?}", header.display()));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("bindings.rs");
    bindings.write_to_file(&out).unwrap_or_else(|e| panic!("elastic-sys: writing {}: {e}", out.display()));
}
