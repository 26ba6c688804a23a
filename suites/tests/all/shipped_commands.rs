//! The shipped drivers' command lines, split into words and run without a shell
//! (`suites::declared`), give their programs what `sh -c` gave them.

use suites::DriversFile;

/// The shipped drivers' command lines (drivers/*.toml, the runners of suites.toml) give their
/// programs the argv `sh -c` gave them when every placeholder was shell-quoted in: running them
/// without a shell changes nothing for them.
#[test]
fn the_shipped_drivers_get_the_argv_a_shell_gave_them() {
    use suites::declared::Placeholders;
    let values = Placeholders {
        workspace: "/out dir/cell/workspace".into(),
        prompt: "Reply with MARKER; it's \"quoted\"".into(),
        mode: "planning".into(),
        codex: "/out dir/cell/tap/codex".into(),
        task: "/out dir/cell/task.json".into(),
        repo: "/the repo".into(),
        cache: "/the cache".into(),
        idle_seconds: 2,
        model: String::new(),
    };
    let as_a_shell_did = |command: &str| {
        let mut line = command.to_string();
        for (name, value) in [
            ("workspace", &values.workspace),
            ("prompt", &values.prompt),
            ("mode", &values.mode),
            ("codex", &values.codex),
            ("task", &values.task),
            ("repo", &values.repo),
            ("cache", &values.cache),
        ] {
            line = line.replace(&format!("{{{name}}}"), &shlex::try_quote(value).unwrap());
        }
        shlex::split(&line.replace("{idle_seconds}", "2")).unwrap()
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut declared: Vec<suites::spec::DeclaredDriver> = Vec::new();
    for file in [
        "drivers/published.toml",
        "drivers/minimal.toml",
        "drivers/community.toml",
    ] {
        let drivers = DriversFile::read(&root.join(file)).unwrap();
        declared.extend(drivers.drivers.into_values());
    }
    for cell in suites::load().unwrap().cells {
        declared.extend(cell.runner.declared.clone());
        let own = cell.runner.driver_cmd.clone();
        declared.extend(own.map(suites::spec::DeclaredDriver::harness_own));
    }
    assert!(declared.len() > 4, "{declared:?}");
    for driver in declared {
        let words = driver.command_words(&values).unwrap();
        assert!(words.assignments.is_empty(), "{}", driver.command);
        assert_eq!(
            words.argv,
            as_a_shell_did(&driver.command),
            "{}",
            driver.command
        );
    }
}
