//! Writing files a user named without losing anything they had.
//!
//! Every command that writes a file the user named goes through here: an existing
//! file is refused unless `--force`, an output that is one of the inputs is refused
//! (even with `--force`: the input would be truncated before it is read), and the file
//! is written beside its target under a temporary name and renamed over it only once
//! complete, so a failed or interrupted command leaves the old file, or none, in place.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Refuse to write `out` if it exists and `force` is not given, or if it is the same
/// file as any of `inputs`.
pub fn check_target(out: &Path, inputs: &[&Path], force: bool) -> Result<()> {
    for input in inputs {
        if same_file(out, input) {
            bail!(
                "--out {} is the input file; write the output to another path",
                out.display()
            );
        }
    }
    if !force && out.exists() {
        bail!(
            "{} already exists; choose another --out or pass --force to overwrite it",
            out.display()
        );
    }
    Ok(())
}

/// True if `a` and `b` name one existing file (through links or `..` too).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The temporary name `out` is written under: hidden, beside it (so the final rename
/// stays on one file system), and unique to this process.
fn partial_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    out.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Write `out` through `f` atomically: `f` writes a temporary file beside `out`, which
/// replaces `out` only if `f` and the final flush succeed; otherwise it is removed and
/// `out` is untouched. Call [`check_target`] first.
pub fn write_atomically<T>(
    out: &Path,
    f: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let tmp = partial_path(out);
    let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let r = f(&mut w).and_then(|v| {
        w.flush()
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        drop(w);
        std::fs::rename(&tmp, out)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))?;
        Ok(v)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Make `dir` ready for a command's outputs: create it, or accept it if it is empty or
/// the command's own (`ours`); refuse a non-empty directory of someone else's files
/// unless `force`, saying what the command `would_write`. Then mark it as the
/// command's with the file `marker`, holding `note`.
pub fn prepare_owned_dir(
    dir: &Path,
    force: bool,
    ours: bool,
    would_write: &str,
    marker: &str,
    note: &str,
) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--out {} is a file, not a directory; choose another --out",
            dir.display()
        );
    }
    let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
    if !force && !ours && !empty {
        bail!(
            "--out {} holds files {would_write}; choose another --out or pass --force",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join(marker), note)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    Ok(())
}

/// Whether `dir` holds only `seed-N` directories, each marked with `marker` as a
/// command's own output: earlier one-seed runs copied in to be reused by a seed sweep
/// (`--seeds`), which may then take `dir` as its own.
pub fn only_seed_dirs(dir: &Path, marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut any = false;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_seed = name
            .strip_prefix("seed-")
            .is_some_and(|n| n.parse::<u64>().is_ok());
        if !is_seed || !e.path().join(marker).exists() {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tierkit-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_dir_of_marked_seed_runs_is_a_seed_sweeps_own() {
        let dir = scratch("seed-dirs");
        assert!(
            !only_seed_dirs(&dir, ".m"),
            "an empty directory holds no seed runs"
        );
        std::fs::create_dir_all(dir.join("seed-42")).unwrap();
        assert!(!only_seed_dirs(&dir, ".m"), "seed-42 is not marked");
        std::fs::write(dir.join("seed-42").join(".m"), "").unwrap();
        assert!(only_seed_dirs(&dir, ".m"));
        std::fs::create_dir_all(dir.join("seed-x")).unwrap();
        assert!(!only_seed_dirs(&dir, ".m"), "seed-x is not a seed");
        std::fs::remove_dir_all(dir.join("seed-x")).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        assert!(
            !only_seed_dirs(&dir, ".m"),
            "a file of the user's is not a seed run"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn existing_targets_and_inputs_are_refused() {
        let d = scratch("refuse");
        let f = d.join("mine.txt");
        std::fs::write(&f, "keep me").unwrap();
        let e = check_target(&f, &[], false).unwrap_err().to_string();
        assert!(e.contains("already exists") && e.contains("--force"), "{e}");
        check_target(&f, &[], true).unwrap();
        // The same file under another name is still the input, even with --force.
        let alias = d.join(".").join("mine.txt");
        let e = check_target(&alias, &[&f], true).unwrap_err().to_string();
        assert!(e.contains("is the input"), "{e}");
        check_target(&d.join("new.txt"), &[&f], false).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep me");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_partial_one() {
        let d = scratch("atomic");
        let f = d.join("out.bin");
        std::fs::write(&f, "old").unwrap();
        let r: Result<()> = write_atomically(&f, |w| {
            w.write_all(b"half")?;
            bail!("broken input")
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "old");
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "no partial file left"
        );
        write_atomically(&f, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
    }
}
