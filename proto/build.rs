//! Compiles the wire `.proto` files with protox (no system `protoc` needed).

#[allow(clippy::disallowed_macros)] // cargo reads build-script directives from stdout
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=wire");
    let fds = protox::compile(["wire/resolvd_wire.proto"], ["wire"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
