//! What a driver asked `codex` for, read from its argv the way the real `codex` command line
//! reads it: leading `-c`/`--config` overrides, then a subcommand. Only a server launch
//! (`app-server`, with or without `--listen stdio://`) gets the cell's arguments appended;
//! `--version`, `app-server generate-json-schema …` and anything else pass through as they are.

/// The `app-server` subcommands that do not start a server.
const TOOL_SUBCOMMANDS: &[&str] = &["generate-json-schema", "generate-ts", "help"];

/// Whether `args` (after the program name) launch the app-server itself.
pub(crate) fn launches_server(args: &[String]) -> bool {
    let mut rest = args.iter().map(String::as_str);
    while let Some(arg) = rest.next() {
        match arg {
            "-c" | "--config" => {
                rest.next();
            }
            _ if arg.starts_with("--config=") || (arg.starts_with("-c") && arg.len() > 2) => {}
            "app-server" => {
                return !rest.any(|a| TOOL_SUBCOMMANDS.contains(&a) || a == "--help" || a == "-h")
            }
            _ => return false,
        }
    }
    false
}

/// The app-server's argv after its program: `prefix`, the driver's own arguments unchanged,
/// then the cell's `server_args` when the driver launches the server.
pub(crate) fn app_server_args(
    prefix: &[String],
    driver: &[String],
    server_args: &[String],
) -> Vec<String> {
    let mut args = prefix.to_vec();
    args.extend(driver.iter().cloned());
    if launches_server(driver) {
        args.extend(server_args.iter().cloned());
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn server_launches_get_the_cells_arguments_and_tools_do_not() {
        for server in [
            "app-server",
            "app-server --listen stdio://",
            "-c a=1 --config b=2 -cc=3 --config=d=4 app-server",
        ] {
            assert!(launches_server(&words(server)), "{server}");
        }
        for other in [
            "--version",
            "app-server generate-json-schema --out x",
            "-c a=1 app-server generate-ts --out x",
            "app-server --help",
            "exec hi",
            "",
            "-c",
        ] {
            assert!(!launches_server(&words(other)), "{other}");
        }
        assert_eq!(
            app_server_args(
                &words("fake-app-server"),
                &words("-c a=1 app-server"),
                &words("--scenario s")
            ),
            words("fake-app-server -c a=1 app-server --scenario s")
        );
        assert_eq!(
            app_server_args(&[], &words("--version"), &words("--scenario s")),
            words("--version")
        );
    }
}
