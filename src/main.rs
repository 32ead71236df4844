use std::process::ExitCode;

/// A web process allocates for every request it answers; mimalloc does that
/// with less work than the system's allocator under many threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    holdfast::cli::main().await
}
