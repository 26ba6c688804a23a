//! The command line of each release the fake plays, walked option by option: every option the
//! recorded `--help` lists (before `app-server` and after it), with a value where it takes one,
//! once and twice, against the fake and — where it is installed — against the real binary of
//! that release; and the recorded answers to bad command lines (`cli_errors.json`), which the
//! fake must give to the byte and the real binary must still give.
//!
//! What each invocation must do is read from the persona's data alone (`cli_help.txt`,
//! `cli_rules.toml`, `startup_config.json`): the same expectation holds the fake and the real
//! binary, so a difference between them fails one of the two. A libtest-mimic harness: the
//! real-binary trials are ignored, with the reason, where that release is not installed
//! (failing under CI=true).

mod prereq;

use fake_app_server::cli::help::{self, HelpText, OptionSpec};
use fake_app_server::cli::rules::{self, CommandRules};
use fake_app_server::persona::{self, Persona};
use libtest_mimic::{Arguments, Failed, Trial};
use serde::Deserialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Bound on one run of either binary (both exit at once: stdin is closed).
const RUN_BOUND: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binary {
    Fake,
    Real,
}

struct Output {
    status: i32,
    stdout: String,
    stderr: String,
}

/// `binary` with `args` in `home` (also its CODEX_HOME's parent), only PATH from this
/// environment; the fake plays `version`, with its simulated sandbox.
fn command(binary: Binary, version: &str, home: &Path, args: &[String]) -> Result<Command, Failed> {
    let program = match binary {
        Binary::Fake => assert_cmd::cargo::cargo_bin("fake-app-server"),
        Binary::Real => prereq::codex_binary(version)?,
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .current_dir(home);
    if binary == Binary::Fake {
        command
            .env("FAKE_APP_SERVER_CODEX_VERSION", version)
            .env("FAKE_APP_SERVER_SANDBOX", "simulated");
    }
    Ok(command)
}

/// A fresh home with its `.codex`, below the target folder (Codex warns about a home below the
/// system's temporary folder); it lives as long as the returned folder.
fn scratch_home() -> Result<(tempfile::TempDir, PathBuf), Failed> {
    let scratch = tempfile::Builder::new()
        .prefix("cli-surface-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let home = scratch.path().join("home");
    std::fs::create_dir_all(home.join(".codex"))?;
    Ok((scratch, home))
}

/// Run `args` with a fresh home (below the target folder: Codex warns about a home below the
/// system's temporary folder), stdin closed, only PATH from this environment.
fn run(binary: Binary, version: &str, args: &[String]) -> Result<Output, Failed> {
    let (_scratch, home) = scratch_home()?;
    let mut child = command(binary, version, &home, args)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut pipes = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || {
            let mut text = String::new();
            pipes.0.read_to_string(&mut text).map(|_| text)
        }),
        std::thread::spawn(move || {
            let mut text = String::new();
            pipes.1.read_to_string(&mut text).map(|_| text)
        }),
    );
    let Some(status) = child.wait_timeout(RUN_BOUND)? else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{binary:?} {args:?} did not exit within {RUN_BOUND:?}").into());
    };
    let stdout = readers.0.join().map_err(|_| "stdout reader panicked")??;
    let stderr = readers.1.join().map_err(|_| "stderr reader panicked")??;
    // The real binary warns when its Codex home sits below a temporary folder (a checkout under
    // /tmp puts the test's there): where the test runs, not what the release says.
    let stderr: String = stderr
        .split_inclusive('\n')
        .filter(|line| {
            !line.starts_with("WARNING: proceeding, even though we could not create PATH aliases")
        })
        .collect();
    Ok(Output {
        status: status.code().unwrap_or(-1),
        stdout,
        // The real binary adds a backtrace to its `Error: …` exits; the message is before it.
        stderr: match stderr.split_once("\n\nStack backtrace:") {
            Some((message, _)) => format!("{message}\n"),
            None => stderr,
        },
    })
}

/// What an invocation must do, from the persona's data.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// Serve (and exit 0 when stdin closes).
    Serves,
    /// Print this on stdout and exit 0.
    Prints(String),
    /// `Error: …` on stderr, exit 1 (the release's refusal before serving).
    Refused(String),
    /// A usage error: exit 2, stderr starting with this.
    UsageError(String),
}

/// A value the real binary accepts for `option`: by option, else by value name, else its first
/// possible value. Files it reads are written into `files`.
fn sample(option: &OptionSpec, files: &Path) -> Result<String, Failed> {
    let file = |name: &str, text: &str| -> Result<String, Failed> {
        let path = files.join(name);
        std::fs::write(&path, text)?;
        Ok(path.display().to_string())
    };
    let value = match (option.long.as_str(), option.value_name.as_deref()) {
        ("cloud-skills-snapshot", _) => file("skills.json", r#"{"skills":[]}"#)?,
        ("startup-client-info", _) => r#"{"name":"cli-surface","version":"1"}"#.to_string(),
        ("code-mode-host", _) => "http://127.0.0.1:9".to_string(),
        ("remote", _) => "ws://127.0.0.1:9".to_string(),
        ("listen", _) => "stdio://".to_string(),
        (_, Some("key=value")) => r#"model="cli-surface-model""#.to_string(),
        (_, Some("FEATURE")) => "goals".to_string(),
        (_, Some("FILE")) | (_, Some("PATH")) => file("file.txt", "x")?,
        (_, Some("DIR")) => files.display().to_string(),
        (_, Some("HEX")) => "0".repeat(64),
        (_, Some("SECONDS")) => "1".to_string(),
        (_, Some("OSS_PROVIDER")) => "ollama".to_string(),
        _ => match option.possible_values.first() {
            Some(first) => first.clone(),
            None => "cli-surface".to_string(),
        },
    };
    Ok(value)
}

/// `--NAME VALUE` (or `--NAME=VALUE` for an option taking several values, which would take
/// the words after it too).
fn words(option: &OptionSpec, value: Option<&str>) -> Vec<String> {
    match value {
        Some(value) if option.multiple => vec![format!("--{}={value}", option.long)],
        Some(value) => vec![format!("--{}", option.long), value.to_string()],
        None => vec![format!("--{}", option.long)],
    }
}

/// One walk: `option` of `command` given `times` times, and what it must do.
struct Walk {
    args: Vec<String>,
    expect: Expect,
}

fn walk(
    persona: &Persona,
    surface: &HelpText,
    command: &str,
    rules: &CommandRules,
    option: &OptionSpec,
    times: usize,
    files: &Path,
) -> Result<Walk, Failed> {
    let value = match option.value_name {
        Some(_) => Some(sample(option, files)?),
        None => None,
    };
    let mut given = Vec::new();
    for _ in 0..times {
        given.extend(words(option, value.as_deref()));
    }
    let mut expect = match option.long.as_str() {
        "help" => Expect::Prints(surface.verbatim.clone()),
        "version" => Expect::Prints(format!("codex-cli {}\n", persona.version)),
        "print-startup-config" => Expect::Prints(persona.startup_config().to_string()),
        _ => Expect::Serves,
    };
    if let Some(other) = rules.requires.get(&option.long) {
        given.push(format!("--{other}"));
        expect = Expect::Prints(persona.startup_config().to_string());
        assert_eq!(
            other, "print-startup-config",
            "a new `requires` rule: say what it does"
        );
    }
    // The walk gives no other option, so no `unless` excuses a refusal.
    let refusal = rules.refuses.iter().find(|r| {
        r.option == option.long && r.applies(value.as_deref().unwrap_or_default(), |_| false)
    });
    if let Some(refusal) = refusal {
        let message = refusal
            .message
            .replace("{value}", value.as_deref().unwrap_or_default());
        expect = Expect::Refused(format!("Error: {message}\n"));
    }
    let repeatable = rules.repeatable.contains(&option.long) || option.multiple;
    if times > 1 && !repeatable {
        let shown = match &option.value_name {
            Some(name) => format!("--{} <{name}>", option.long),
            None => format!("--{}", option.long),
        };
        expect = Expect::UsageError(format!(
            "error: the argument '{shown}' cannot be used multiple times\n"
        ));
    }
    let args = match command {
        "codex" => given
            .into_iter()
            .chain(["app-server".to_string()])
            .collect(),
        _ => std::iter::once("app-server".to_string())
            .chain(given)
            .collect(),
    };
    Ok(Walk { args, expect })
}

fn check(binary: Binary, version: &str, walk: &Walk) -> Result<(), Failed> {
    let out = run(binary, version, &walk.args)?;
    let shown = || {
        format!(
            "{binary:?} {version} {:?}: exit {}\nstdout: {}\nstderr: {}",
            walk.args, out.status, out.stdout, out.stderr
        )
    };
    let ok = match &walk.expect {
        // The real binary may log on stderr while it serves; the fake says nothing.
        Expect::Serves => out.status == 0 && (binary == Binary::Real || out.stderr.is_empty()),
        Expect::Prints(text) => out.status == 0 && out.stdout == *text,
        Expect::Refused(text) => out.status == 1 && out.stderr == *text,
        Expect::UsageError(start) => out.status == 2 && out.stderr.starts_with(start.as_str()),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("expected {:?}\n{}", walk.expect, shown()).into())
    }
}

/// `config/read`'s session-flags layer of a server launched with `args` (stdin kept open until
/// the answer came: the real server may stop reading once stdin closes).
fn session_flags(
    binary: Binary,
    version: &str,
    args: &[String],
) -> Result<serde_json::Value, Failed> {
    use std::io::{BufRead, Write};
    let (_scratch, home) = scratch_home()?;
    let mut child = command(binary, version, &home, args)?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"id":1,"method":"initialize","params":{{"clientInfo":{{"name":"cli-surface","version":"1"}}}}}}"#
    )?;
    writeln!(stdin, r#"{{"method":"initialized"}}"#)?;
    writeln!(
        stdin,
        r#"{{"id":2,"method":"config/read","params":{{"includeLayers":true}}}}"#
    )?;
    stdin.flush()?;
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + RUN_BOUND;
    let answer = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = received.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(
                format!("{binary:?} {args:?}: no config/read answer within {RUN_BOUND:?}").into(),
            );
        };
        let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if message["id"] == 2 {
            break message;
        }
    };
    drop(stdin);
    let _ = child.wait_timeout(RUN_BOUND)?;
    let _ = child.kill();
    let layers = answer["result"]["layers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(layers
        .into_iter()
        .find(|layer| layer["name"]["type"] == "sessionFlags")
        .map(|layer| layer["config"].clone())
        .unwrap_or_default())
}

/// A global option given before and after `app-server`: only the later values count.
fn check_global(
    binary: Binary,
    version: &str,
    option: &str,
    features: &[String],
) -> Result<(), Failed> {
    let args: Vec<String> = [
        format!("--{option}"),
        features[0].clone(),
        "app-server".into(),
        format!("--{option}"),
        features[1].clone(),
    ]
    .into();
    let flags = session_flags(binary, version, &args)?;
    let value = option == "enable";
    let expected = serde_json::json!({"features": {features[1].clone(): value}});
    if flags == expected {
        Ok(())
    } else {
        Err(
            format!("{binary:?} {version} {args:?}: session flags {flags}, expected {expected}")
                .into(),
        )
    }
}

/// A recorded answer of the real binary to a bad command line.
#[derive(Deserialize)]
struct Recorded {
    args: Vec<String>,
    status: i32,
    stdout: String,
    stderr: String,
}

fn persona_file(version: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("personas")
        .join(version)
        .join(name)
}

fn check_recorded(binary: Binary, version: &str, recorded: &Recorded) -> Result<(), Failed> {
    let out = run(binary, version, &recorded.args)?;
    if (out.status, out.stdout.as_str(), out.stderr.as_str())
        == (
            recorded.status,
            recorded.stdout.as_str(),
            recorded.stderr.as_str(),
        )
    {
        return Ok(());
    }
    Err(format!(
        "{binary:?} {version} {:?}\nrecorded: exit {}\n{}{}\ngot: exit {}\n{}{}",
        recorded.args,
        recorded.status,
        recorded.stdout,
        recorded.stderr,
        out.status,
        out.stdout,
        out.stderr
    )
    .into())
}

/// The same check of the fake (`fake::NAME`) and of the real binary (`needs_real_codex::NAME`,
/// ignored with the reason when it is `missing`).
fn both(
    name: &str,
    missing: &Option<String>,
    check: impl Fn(Binary) -> Result<(), Failed> + Send + Sync + 'static,
) -> [Trial; 2] {
    let check = std::sync::Arc::new(check);
    let on_fake = check.clone();
    [
        Trial::test(format!("fake::{name}"), move || on_fake(Binary::Fake)),
        test_support::trial(
            format!("needs_real_codex::{name}"),
            missing.clone(),
            move || check(Binary::Real),
        ),
    ]
}

fn trials() -> Result<Vec<Trial>, Failed> {
    let files = tempfile::Builder::new()
        .prefix("cli-surface-files-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?
        .keep();
    let mut trials = Vec::new();
    for persona in persona::all() {
        let version = persona.version;
        let missing = prereq::codex_binary(version).err();
        let sections = help::parse_recording(persona.cli_help_text())?;
        let rules = rules::parse(persona.cli_rules_text())?;
        for command in ["codex", "codex app-server"] {
            let surface = &sections[command];
            let command_rules = rules.get(command).cloned().unwrap_or_default();
            for option in &surface.options {
                for times in [1, 2] {
                    if times == 2 && matches!(option.long.as_str(), "help" | "version") {
                        continue;
                    }
                    let walk = walk(
                        persona,
                        surface,
                        command,
                        &command_rules,
                        option,
                        times,
                        &files,
                    )?;
                    let name = format!(
                        "{version}::{}::--{}::x{times}",
                        command.replace(' ', "_"),
                        option.long
                    );
                    trials.extend(both(&name, &missing, move |binary| {
                        check(binary, version, &walk)
                    }));
                }
            }
        }
        // Two features of the release that are off by default (`codex features list`).
        let features: Vec<String> = std::fs::read_to_string(persona_file(version, "features.txt"))?
            .lines()
            .filter(|line| line.split_whitespace().last() == Some("false"))
            .filter_map(|line| line.split_whitespace().next().map(str::to_string))
            .take(2)
            .collect();
        for option in rules
            .get("codex")
            .map(|r| r.global.clone())
            .unwrap_or_default()
        {
            let name = format!("{version}::global::--{option}");
            let features = features.clone();
            trials.extend(both(&name, &missing, move |binary| {
                check_global(binary, version, &option, &features)
            }));
        }
        let recorded: Vec<Recorded> = serde_json::from_str(&std::fs::read_to_string(
            persona_file(version, "cli_errors.json"),
        )?)?;
        for (index, recorded) in recorded.into_iter().enumerate() {
            let name = format!(
                "{version}::recorded_error_{index}::{}",
                recorded.args.join("_")
            );
            trials.extend(both(&name, &missing, move |binary| {
                check_recorded(binary, version, &recorded)
            }));
        }
    }
    Ok(trials)
}

fn main() {
    let args = Arguments::from_args();
    let trials = trials().unwrap_or_else(|e| panic!("building the trials: {e:?}"));
    libtest_mimic::run(&args, trials).exit();
}
