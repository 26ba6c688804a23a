fn main() -> std::process::ExitCode {
    fake_app_server::cli_main(std::env::args_os().skip(1))
}
