//! Compiles `proto/turnstone/v1/*.proto` with `protox` (pure Rust: no `protoc` anywhere) and
//! generates the messages, servers and clients with `tonic-prost-build`. The encoded
//! descriptor set is written beside them for server reflection, and the contract's method
//! names (`turnstone.v1.NodeService/Send`, …) as the closed label set of the call metrics.

use std::fmt::Write as _;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        "turnstone/v1/events.proto",
        "turnstone/v1/node.proto",
        "turnstone/v1/console.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let fds = protox::compile(files, [&root])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("turnstone_v1_descriptor.bin"), fds.encode_to_vec())?;
    let mut methods = String::from(
        "/// Every RPC of the contract, as `package.Service/Method`.\n\
         pub const CONTRACT_METHODS: &[&str] = &[\n",
    );
    for file in &fds.file {
        for service in &file.service {
            for method in &service.method {
                writeln!(
                    methods,
                    "    \"{}.{}/{}\",",
                    file.package(),
                    service.name(),
                    method.name()
                )?;
            }
        }
    }
    methods.push_str("];\n");
    std::fs::write(out.join("turnstone_v1_methods.rs"), methods)?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
