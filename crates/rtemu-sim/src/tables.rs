//! Finding distribution tables on disk, for `distribution NAME` and `tables netem`.
//!
//! A name with a `/` or ending in `.dist` is a path. Any other name is looked up as
//! `NAME.dist` in the directories of `RTEMU_TABLE_PATH` (colon-separated), then where
//! iproute2 installs its tables, so `distribution normal tables netem` uses the very table
//! netem would use.

use std::path::{Path, PathBuf};

use rtemu_model::dist::DistTable;
use rtemu_model::TableSource;

/// Where iproute2 keeps `normal.dist`, `pareto.dist`, … on the common distributions.
pub const IPROUTE2_TABLE_DIRS: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/tc",
    "/usr/lib/aarch64-linux-gnu/tc",
    "/usr/lib/tc",
    "/usr/lib64/tc",
];

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

    fn read(path: &Path) -> Result<DistTable, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        // Named by its path, so that a parse error reads `path:line:column: …`.
        DistTable::parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
    }
}

impl TableSource for FileTables {
    fn table(&self, name: &str) -> Result<DistTable, String> {
        if name.contains('/') || name.ends_with(".dist") {
            return Self::read(Path::new(name));
        }
        let file = format!("{name}.dist");
        match self.dirs.iter().map(|d| d.join(&file)).find(|p| p.is_file()) {
            Some(path) => Self::read(&path),
            None => Err(format!(
                "no table {file} in {} (install iproute2 for netem's tables, or give a path to a .dist file)",
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
}
