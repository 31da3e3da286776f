//! Finding distribution tables on disk, for `distribution NAME` and `tables netem`.
//!
//! A name with a `/` or ending in `.dist` is a path. Any other name is looked up as
//! `NAME.dist` in the directories of `RTEMU_TABLE_PATH` (colon-separated), then where
//! iproute2 installs its tables, so `distribution normal tables netem` uses the very table
//! netem would use.
//!
//! rtemu often runs as root, and a table's path comes from the user (a topology file,
//! `link set`), so a table is read only from a regular file of at most
//! [`MAX_SMALL_FILE_BYTES`] ([`read_small_file`]), and no error shows the file's content.

use std::path::{Path, PathBuf};

use rtemu_model::dist::DistTable;
use rtemu_model::{LinkConfig, TableSource};

/// Where iproute2 keeps `normal.dist`, `pareto.dist`, … on the common distributions.
pub const IPROUTE2_TABLE_DIRS: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/tc",
    "/usr/lib/aarch64-linux-gnu/tc",
    "/usr/lib/tc",
    "/usr/lib64/tc",
];

/// The most bytes read from a distribution table or a model file: 1 MiB, eight times the
/// largest table the kernel takes (16384 entries of at most 7 characters).
pub const MAX_SMALL_FILE_BYTES: u64 = 1 << 20;

/// Reads a distribution table or a model file named by a user: a regular file of at most
/// [`MAX_SMALL_FILE_BYTES`] (see [`rtemu_sys::input`]).
pub fn read_small_file(path: &Path) -> std::io::Result<String> {
    rtemu_sys::input::read_small_file(path, MAX_SMALL_FILE_BYTES)
}

/// Tables read from files.
#[derive(Debug, Clone)]
pub struct FileTables {
    dirs: Vec<PathBuf>,
}

impl FileTables {
    /// Looks in `RTEMU_TABLE_PATH`, then in iproute2's directories.
    pub fn from_env() -> Self {
        let mut dirs: Vec<PathBuf> = std::env::var_os("RTEMU_TABLE_PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        dirs.extend(IPROUTE2_TABLE_DIRS.iter().map(PathBuf::from));
        FileTables { dirs }
    }

    /// Looks only in `dirs`.
    pub fn in_dirs(dirs: Vec<PathBuf>) -> Self {
        FileTables { dirs }
    }

    /// The file table `name` is read from: a path as given, else the first `NAME.dist` of
    /// the directories; `None` when there is none.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        if name.contains('/') || name.ends_with(".dist") {
            return Some(PathBuf::from(name));
        }
        let file = format!("{name}.dist");
        self.dirs
            .iter()
            .map(|d| d.join(&file))
            .find(|p| p.is_file())
    }

    /// The files of the tables `cfg` draws its delay and its slots from (see
    /// [`LinkConfig::table_names`]): inputs of whatever reads `cfg`, which no output of the
    /// same command may overwrite.
    pub fn files_of(&self, cfg: &LinkConfig) -> Vec<PathBuf> {
        cfg.table_names()
            .filter_map(|name| self.path(name))
            .collect()
    }

    fn read(path: &Path) -> Result<DistTable, String> {
        let text =
            read_small_file(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        // Named by its path, so that a parse error reads `path:line:column: …`.
        DistTable::parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
    }
}

impl TableSource for FileTables {
    fn table(&self, name: &str) -> Result<DistTable, String> {
        match self.path(name) {
            Some(path) => Self::read(&path),
            None => Err(format!(
                "no table {name}.dist in {} (install iproute2 for netem's tables, or give a path to a .dist file)",
                self.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tables_by_name_and_path_and_explains_a_miss() {
        let dir = std::env::temp_dir().join(format!("rtemu-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("flat.dist"), "# test\n-8192 0 8192\n").unwrap();
        let tables = FileTables::in_dirs(vec![dir.clone()]);
        assert_eq!(tables.table("flat").unwrap().values(), &[-8192, 0, 8192]);
        let by_path = dir.join("flat.dist");
        assert_eq!(
            tables
                .table(by_path.to_str().unwrap())
                .unwrap()
                .values()
                .len(),
            3
        );
        let miss = tables.table("nonesuch").unwrap_err();
        assert!(
            miss.contains("no table nonesuch.dist in") && miss.contains(dir.to_str().unwrap()),
            "{miss}"
        );
        std::fs::write(dir.join("bad.dist"), "1 2 x\n").unwrap();
        let bad = tables.table("bad").unwrap_err();
        assert!(bad.contains("bad.dist:1:5:"), "{bad}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A temporary directory removed when dropped, even when the test fails.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("rtemu-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_table_error_never_shows_the_file() {
        let dir = TempDir::new("tables-secret");
        let secret = dir.0.join("shadow");
        std::fs::write(&secret, "root:s3cretword:19000:0:99999:7:::\nbin:*:19000\n").unwrap();
        let e = FileTables::in_dirs(vec![])
            .table(secret.to_str().unwrap())
            .unwrap_err();
        assert!(e.contains(":1:1: expected a decimal integer"), "{e}");
        assert!(!e.contains("s3cretword") && !e.contains("root"), "{e}");
    }

    #[test]
    fn fifos_devices_and_large_files_are_refused_at_once() {
        let dir = TempDir::new("tables-fifo");
        let fifo = dir.0.join("pipe.dist");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        // No writer ever opens the FIFO: a blocking open would wait for ever.
        let e = FileTables::in_dirs(vec![])
            .table(fifo.to_str().unwrap())
            .unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_small_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let big = dir.0.join("big.dist");
        std::fs::write(&big, "0 ".repeat(MAX_SMALL_FILE_BYTES as usize / 2 + 1)).unwrap();
        let e = read_small_file(&big).unwrap_err();
        assert!(e.to_string().contains("more than the 1048576 bytes"), "{e}");
        assert_eq!(
            read_small_file(&dir.0.join("missing")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    #[test]
    fn the_tables_of_the_delay_and_of_the_slots_are_both_inputs() {
        let dir = TempDir::new("tables-inputs");
        for name in ["gaps", "lag"] {
            std::fs::write(dir.0.join(format!("{name}.dist")), "-8192 0 8192\n").unwrap();
        }
        let tables = FileTables::in_dirs(vec![dir.0.clone()]);
        let files = |netem: &str| tables.files_of(&rtemu_model::netem::parse(netem).unwrap());
        assert_eq!(
            files("delay 10ms 1ms distribution lag slot distribution gaps 2ms 1ms"),
            [dir.0.join("lag.dist"), dir.0.join("gaps.dist")]
        );
        assert_eq!(
            files("delay 1ms slot distribution gaps 2ms 1ms"),
            [dir.0.join("gaps.dist")]
        );
        assert!(files("delay 1ms slot 2ms 4ms").is_empty());
    }
}
