//! Compiles the wire `.proto` files with protox (no system `protoc` needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=wire");
    let fds = protox::compile(["wire/resolvd_wire.proto"], ["wire"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
