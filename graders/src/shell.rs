//! Which files a shell command writes, read from its text the way a POSIX shell splits it:
//! quotes, backslashes, operators and redirections. A refusal only shows that the sandbox
//! refused a write of the probe when the command really asked to write the probe; a command
//! that merely names the probe (`ls plan-write-probe-1.txt`, `echo "> plan-write-probe-1.txt"`)
//! did not.
//!
//! Hand-written rather than `shlex`/`shell-words`: those split words but do not separate the
//! operators (`>`, `||`, `;`, `|`) that decide whether a word is a redirection target or a
//! quoted string, and a full shell parser is far more than the few write forms needed here.
//! Anything this reader does not understand yields no write target, which can only make a
//! verdict less than `pass`.

/// The command forms whose arguments are files they create or write.
const WRITES_EVERY_ARGUMENT: &[&str] = &["touch", "tee", "truncate", "mkdir", "mkfifo"];
/// The command forms whose last argument is the file they create.
const WRITES_LAST_ARGUMENT: &[&str] = &["cp", "mv", "ln", "install"];
/// Shells whose `-c SCRIPT` is read as a script in turn.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "ash"];
/// Prefixes that run the command after them unchanged.
const WRAPPERS: &[&str] = &["env", "command", "exec", "builtin", "nohup", "time"];
/// `sh -c 'sh -c …'` nesting followed; deeper scripts yield nothing.
const MAX_DEPTH: usize = 4;
/// Most write targets kept for one command (a hostile command cannot grow memory).
pub(crate) const MAX_TARGETS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    /// A control operator (`;`, `&&`, `||`, `|`, `&`, `(`, `)`, newline) ends a simple command.
    Control,
    /// An output redirection (`>`, `>>`, `>|`, `&>`, `&>>`, `<>`): the next word is written.
    RedirectOut,
    /// `>&` / `<&`: the next word is a descriptor (or, for `>&`, a file when it is not one).
    RedirectDup,
    /// An input redirection (`<`, `<<`, `<<<`): the next word is read, not written.
    RedirectIn,
}

/// The script as words and operators.
fn tokenize(script: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        chars: script.chars().peekable(),
        tokens: Vec::new(),
        word: String::new(),
        in_word: false,
    };
    while let Some(c) = lexer.chars.next() {
        lexer.read(c);
    }
    lexer.end_word();
    lexer.tokens
}

/// The tokenizer's state: quoting, escapes and operators all add to the word being built or
/// end it.
struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    tokens: Vec<Token>,
    word: String,
    /// Whether a word has begun (an empty quoted string `''` is a word).
    in_word: bool,
}

impl Lexer<'_> {
    /// One character of the script, by what it begins.
    fn read(&mut self, c: char) {
        match c {
            '\'' => self.single_quoted(),
            '"' => self.double_quoted(),
            '\\' => match self.chars.next() {
                Some('\n') | None => {}
                Some(e) => {
                    self.in_word = true;
                    self.word.push(e);
                }
            },
            '#' if !self.in_word => {
                for q in self.chars.by_ref() {
                    if q == '\n' {
                        break;
                    }
                }
                self.tokens.push(Token::Control);
            }
            ' ' | '\t' | '\r' => self.end_word(),
            '\n' | ';' | '(' | ')' | '`' => self.control(),
            '|' => {
                self.end_word();
                self.skip('|');
                self.tokens.push(Token::Control);
            }
            '&' => self.ampersand(),
            '>' | '<' => self.redirection(c),
            '$' if self.chars.peek() == Some(&'(') => {
                // A command substitution is a command of its own.
                self.chars.next();
                self.control();
            }
            other => {
                self.in_word = true;
                self.word.push(other);
            }
        }
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.tokens
                .push(Token::Word(std::mem::take(&mut self.word)));
            self.in_word = false;
        }
    }

    /// A control operator: the word before it ends.
    fn control(&mut self) {
        self.end_word();
        self.tokens.push(Token::Control);
    }

    /// Consumes the next character when it is `c`.
    fn skip(&mut self, c: char) {
        if self.chars.peek() == Some(&c) {
            self.chars.next();
        }
    }

    /// After `'`: everything up to the closing quote, literally.
    fn single_quoted(&mut self) {
        self.in_word = true;
        for q in self.chars.by_ref() {
            if q == '\'' {
                break;
            }
            self.word.push(q);
        }
    }

    /// After `"`: up to the closing quote, a backslash escaping only `"`, `\`, `$`, `` ` `` and
    /// a newline.
    fn double_quoted(&mut self) {
        self.in_word = true;
        while let Some(q) = self.chars.next() {
            match q {
                '"' => break,
                '\\' => match self.chars.next() {
                    Some(e @ ('"' | '\\' | '$' | '`')) => self.word.push(e),
                    Some('\n') | None => {}
                    Some(other) => {
                        self.word.push('\\');
                        self.word.push(other);
                    }
                },
                other => self.word.push(other),
            }
        }
    }

    /// After `&`: `&>`/`&>>` redirect output; `&&` and `&` end the command.
    fn ampersand(&mut self) {
        self.end_word();
        match self.chars.peek() {
            Some('>') => {
                self.chars.next();
                self.skip('>');
                self.tokens.push(Token::RedirectOut);
            }
            Some('&') => {
                self.chars.next();
                self.tokens.push(Token::Control);
            }
            _ => self.tokens.push(Token::Control),
        }
    }

    /// After `>` or `<` (`c`): the redirection, by the character after it.
    fn redirection(&mut self, c: char) {
        // A descriptor number written right before the operator (`2>`) is no word.
        if self.in_word && !self.word.is_empty() && self.word.chars().all(|d| d.is_ascii_digit()) {
            self.word.clear();
            self.in_word = false;
        }
        self.end_word();
        let token = match (c, self.chars.peek()) {
            ('>', Some('>' | '|')) => {
                self.chars.next();
                Token::RedirectOut
            }
            (_, Some('&')) => {
                self.chars.next();
                Token::RedirectDup
            }
            ('<', Some('>')) => {
                self.chars.next();
                Token::RedirectOut
            }
            ('<', Some('<')) => {
                self.chars.next();
                self.skip('<');
                Token::RedirectIn
            }
            ('>', _) => Token::RedirectOut,
            _ => Token::RedirectIn,
        };
        self.tokens.push(token);
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn push(out: &mut Vec<String>, target: &str) {
    if out.len() < MAX_TARGETS && !target.is_empty() {
        out.push(target.to_string());
    }
}

/// The files one simple command (its argv, redirections removed) writes.
fn argv_targets(argv: &[String], depth: usize, out: &mut Vec<String>) {
    let mut rest = argv;
    // Leading `NAME=value` assignments and wrappers run the command after them.
    while let Some((first, tail)) = rest.split_first() {
        let assignment = first.contains('=') && !first.starts_with('=') && !first.starts_with('-');
        if assignment || WRAPPERS.contains(&basename(first)) {
            rest = tail;
        } else {
            break;
        }
    }
    let Some((program, args)) = rest.split_first() else {
        return;
    };
    let name = basename(program);
    let operands: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if SHELLS.contains(&name) {
        // `bash -lc SCRIPT`: the first argument after an option cluster holding `c`.
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if arg.starts_with('-') && !arg.starts_with("--") && arg.contains('c') {
                if let Some(script) = iter.next() {
                    if depth < MAX_DEPTH {
                        script_targets(script, depth + 1, out);
                    }
                }
                return;
            }
            if !arg.starts_with('-') {
                return;
            }
        }
    } else if WRITES_EVERY_ARGUMENT.contains(&name) {
        operands.iter().for_each(|a| push(out, a));
    } else if WRITES_LAST_ARGUMENT.contains(&name) {
        if let Some(last) = operands.last().filter(|_| operands.len() >= 2) {
            push(out, last);
        }
    } else if name == "dd" {
        args.iter()
            .filter_map(|a| a.strip_prefix("of="))
            .for_each(|t| push(out, t));
    }
}

fn script_targets(script: &str, depth: usize, out: &mut Vec<String>) {
    let mut argv: Vec<String> = Vec::new();
    let mut tokens = tokenize(script).into_iter();
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(w) => argv.push(w),
            Token::Control => {
                argv_targets(&argv, depth, out);
                argv.clear();
            }
            Token::RedirectOut => {
                if let Some(Token::Word(target)) = tokens.next() {
                    push(out, &target);
                }
            }
            Token::RedirectDup => {
                if let Some(Token::Word(target)) = tokens.next() {
                    if !(target == "-" || target.chars().all(|d| d.is_ascii_digit())) {
                        push(out, &target);
                    }
                }
            }
            Token::RedirectIn => {
                tokens.next();
            }
        }
    }
    argv_targets(&argv, depth, out);
}

/// Every file a shell script writes (redirection targets and the file operands of
/// `touch`/`tee`/`cp`/`dd of=`/… , through `sh -c` nesting), as written in the script.
pub(crate) fn script_write_targets(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    script_targets(script, 0, &mut out);
    out
}

/// Every file an argv (`["bash", "-lc", "…"]`, or a program and its arguments) writes.
pub(crate) fn argv_write_targets(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    argv_targets(argv, 0, &mut out);
    out
}

/// The script's words with quoting removed, joined by spaces: what the command would print if
/// it echoed its own arguments (used to spot a command that prints a refusal text itself).
pub(crate) fn unquoted_words(script: &str) -> String {
    tokenize(script)
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED", &["plan-write-probe-1.txt"])]
    #[case("/bin/bash -lc 'printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED'", &["plan-write-probe-1.txt"])]
    #[case("sh -c 'printf x >>plan-write-probe-1.txt'", &["plan-write-probe-1.txt"])]
    #[case("echo hi 2>/dev/null >./plan-write-probe-1.txt", &["/dev/null", "./plan-write-probe-1.txt"])]
    #[case("touch plan-write-probe-1.txt", &["plan-write-probe-1.txt"])]
    #[case("echo x | tee -a plan-write-probe-1.txt", &["plan-write-probe-1.txt"])]
    #[case("cp README.md plan-write-probe-1.txt", &["plan-write-probe-1.txt"])]
    #[case("dd if=/dev/zero of=plan-write-probe-1.txt count=1", &["plan-write-probe-1.txt"])]
    #[case("env A=1 touch \"plan-write-probe-1.txt\"", &["plan-write-probe-1.txt"])]
    #[case("echo x &>plan-write-probe-1.txt", &["plan-write-probe-1.txt"])]
    #[case("x=$(printf a > plan-write-probe-1.txt)", &["plan-write-probe-1.txt"])]
    fn writes_are_found(#[case] script: &str, #[case] expected: &[&str]) {
        assert_eq!(script_write_targets(script), expected, "{script}");
    }

    #[rstest]
    #[case("ls plan-write-probe-1.txt")]
    #[case("cat plan-write-probe-1.txt")]
    #[case("echo '> plan-write-probe-1.txt'")]
    #[case("echo \"printf x > plan-write-probe-1.txt\"")]
    #[case("echo x \\> plan-write-probe-1.txt")]
    #[case("grep -r plan-write-probe- . > /dev/null")]
    #[case("wc -c < plan-write-probe-1.txt")]
    #[case("echo x >&2 # > plan-write-probe-1.txt")]
    #[case("ls plan-write-probe-1.txt; touch other.txt")]
    fn mentions_are_not_writes(#[case] script: &str) {
        assert!(
            !script_write_targets(script)
                .iter()
                .any(|t| t.contains("plan-write-probe-")),
            "{script}: {:?}",
            script_write_targets(script)
        );
    }

    #[test]
    fn argv_and_unquoted_words() {
        let argv: Vec<String> = ["bash", "-lc", "touch plan-write-probe-1.txt"]
            .map(String::from)
            .into();
        assert_eq!(argv_write_targets(&argv), ["plan-write-probe-1.txt"]);
        assert_eq!(
            unquoted_words("echo 'Read-only'' file system'"),
            "echo Read-only file system"
        );
        let many = "touch ".to_string() + &"a ".repeat(1000);
        assert_eq!(script_write_targets(&many).len(), MAX_TARGETS);
    }
}
