use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    holdfast::cli::main().await
}
