//! The one command-line convention of every DPDK program here, DPDK's own:
//! `PROGRAM [SUBCOMMAND] [EAL args] -- [program args]`.
//!
//! With a `--`, the words between the head (the program name, and a subcommand where the
//! program has them) and the first `--` are EAL's; the words after it are the program's.
//! Without one there are no EAL arguments. A word before `--` that is one of the program's own
//! options cannot be meant for EAL (EAL has none of its names): it says the order was turned
//! around (`run --config F -- -l 0,1`), and is refused with the right order instead of being
//! handed to EAL, which would fail on it with a message about EAL.

use std::ffi::OsString;

/// A command line split by the convention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EalSplit {
    /// What the program's parser gets: the head, then the words after `--`.
    pub program: Vec<OsString>,
    /// The EAL arguments (without a program name).
    pub eal: Vec<OsString>,
}

/// Splits `argv` (the program name first) whose first `head` words are the program's head (1:
/// the name; 2: the name and a subcommand). `cmd` is the program's clap command, used to tell
/// its options from EAL's; the refusal names the program `name` and quotes `usage(word)`, the
/// right order for the misplaced `word`.
pub fn split_eal(
    argv: Vec<OsString>,
    head: usize,
    cmd: &clap::Command,
    name: &str,
    usage: impl Fn(&str) -> String,
) -> Result<EalSplit, String> {
    let Some(dash) = argv.iter().position(|a| a == "--") else {
        return Ok(EalSplit {
            program: argv,
            eal: Vec::new(),
        });
    };
    let head = head.min(dash);
    let eal = argv[head..dash].to_vec();
    // The subcommand's options when there is one, else the command's own.
    let sub = (head >= 2)
        .then(|| argv[1].to_str().and_then(|s| cmd.find_subcommand(s)))
        .flatten()
        .unwrap_or(cmd);
    if let Some(word) = eal
        .iter()
        .filter_map(|a| a.to_str())
        .find(|w| is_option_of(sub, w))
    {
        return Err(format!(
            "{word:?} is {name}'s option, not EAL's: EAL arguments come first, `{}`",
            usage(word)
        ));
    }
    let mut program = argv[..head].to_vec();
    program.extend(argv[dash + 1..].iter().cloned());
    Ok(EalSplit { program, eal })
}

/// Whether `word` (`--name` or `--name=value`) names one of `cmd`'s own long options. Short
/// options are not compared: EAL's are single letters too, and some coincide (`-n` is EAL's
/// memory channels and the leaf's count, `-c` EAL's core mask and the switch's config).
fn is_option_of(cmd: &clap::Command, word: &str) -> bool {
    let Some(name) = word.strip_prefix("--") else {
        return false;
    };
    let name = name.split('=').next().unwrap_or(name);
    cmd.get_arguments()
        .filter_map(|a| a.get_long())
        .any(|l| l == name && !matches!(l, "help" | "version"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn u(word: &str) -> String {
        format!("p [EAL args] -- {word} ...")
    }

    fn prog() -> Command {
        Command::new("p")
            .arg(Arg::new("group").long("group").short('g'))
            .subcommand(Command::new("run").arg(Arg::new("config").long("config")))
    }

    #[test]
    fn eal_arguments_come_before_the_dash() {
        let s = split_eal(os(&["p", "-l", "2", "--", "-g", "7"]), 1, &prog(), "p", u).unwrap();
        assert_eq!(s.program, os(&["p", "-g", "7"]));
        assert_eq!(s.eal, os(&["-l", "2"]));
        // no dash: no EAL arguments; a second dash is the program's
        let s = split_eal(os(&["p", "-g", "7"]), 1, &prog(), "p", u).unwrap();
        assert_eq!((s.program, s.eal), (os(&["p", "-g", "7"]), os(&[])));
        let s = split_eal(os(&["p", "--", "-g", "--"]), 1, &prog(), "p", u).unwrap();
        assert_eq!((s.program, s.eal), (os(&["p", "-g", "--"]), os(&[])));
    }

    #[test]
    fn a_subcommand_stays_in_the_head() {
        let argv = os(&["p", "run", "--no-huge", "--", "--config", "f"]);
        let s = split_eal(argv, 2, &prog(), "p", u).unwrap();
        assert_eq!(s.program, os(&["p", "run", "--config", "f"]));
        assert_eq!(s.eal, os(&["--no-huge"]));
    }

    #[test]
    fn the_programs_options_before_the_dash_are_the_old_order() {
        for (argv, head, word) in [
            (&["p", "--group", "7", "--", "-l", "2"][..], 1, "--group"),
            (&["p", "--group=7", "--", "-l", "2"][..], 1, "--group=7"),
            (
                &["p", "run", "--config", "f", "--", "-l", "0"][..],
                2,
                "--config",
            ),
        ] {
            let e = split_eal(os(argv), head, &prog(), "p", u).unwrap_err();
            assert!(
                e.starts_with(&format!("{word:?} is p's option, not EAL's")),
                "{e}"
            );
            assert!(e.ends_with(&format!("`p [EAL args] -- {word} ...`")), "{e}");
        }
        // EAL's own words are not mistaken for the program's (`-l`, `--no-huge`, `--vdev=x`),
        // nor a short option that EAL has too (`-g` stands for EAL's in this test)
        let argv = os(&[
            "p",
            "-l",
            "0",
            "--no-huge",
            "--vdev=net_ring0",
            "-g",
            "--",
            "-g",
            "1",
        ]);
        assert!(split_eal(argv, 1, &prog(), "p", u).is_ok());
    }
}
