//! The host's view of its NVIDIA GPUs, from `nvidia-smi`: what a container
//! was given (provenance), and whether those GPUs are free before a runtime
//! starts on them (the one before may still be releasing its memory).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::plan::Gpus;

/// The fields asked of `nvidia-smi --query-gpu`, in this order.
const QUERY: &str = "index,uuid,name,driver_version,memory.total,memory.used";

/// A GPU counts as free when no more than this share of its memory is in use
/// (a display or a monitoring agent may hold a little), and at least
/// [`FREE_FLOOR_MIB`] is always allowed.
pub const FREE_SHARE: f64 = 0.05;
pub const FREE_FLOOR_MIB: u64 = 512;

/// How long a start waits for its GPUs to be free, and how often it looks.
pub const FREE_WAIT: Duration = Duration::from_secs(120);
pub const FREE_POLL: Duration = Duration::from_secs(1);

/// One GPU as `nvidia-smi` reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuState {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub driver_version: String,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
}

impl GpuState {
    /// Memory in use above which this GPU is not free.
    pub fn free_limit_mib(&self) -> u64 {
        ((self.memory_total_mib as f64 * FREE_SHARE) as u64).max(FREE_FLOOR_MIB)
    }

    pub fn is_free(&self) -> bool {
        self.memory_used_mib <= self.free_limit_mib()
    }
}

/// Every GPU the `nvidia_smi` binary lists.
pub fn query(nvidia_smi: &Path) -> Result<Vec<GpuState>, String> {
    let out = std::process::Command::new(nvidia_smi)
        .arg(format!("--query-gpu={QUERY}"))
        .arg("--format=csv,noheader,nounits")
        .output()
        .map_err(|e| format!("running {}: {e}", nvidia_smi.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --query-gpu failed ({}): {}",
            nvidia_smi.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` output, a line
/// per GPU. Names hold no comma in NVIDIA's naming; a line that does not
/// split into the six fields is an error naming the line.
pub fn parse(text: &str) -> Result<Vec<GpuState>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let bad = |what: &str| format!("nvidia-smi line {line:?}: {what}");
            let [index, uuid, name, driver, total, used] = f[..] else {
                return Err(bad("expected 6 comma-separated fields"));
            };
            let mib = |v: &str, field: &str| {
                v.parse::<u64>()
                    .map_err(|_| bad(&format!("{field} {v:?} is not a number of MiB")))
            };
            Ok(GpuState {
                index: index
                    .parse()
                    .map_err(|_| bad(&format!("index {index:?} is not a number")))?,
                uuid: uuid.to_string(),
                name: name.to_string(),
                driver_version: driver.to_string(),
                memory_total_mib: mib(total, "memory.total")?,
                memory_used_mib: mib(used, "memory.used")?,
            })
        })
        .collect()
}

/// The GPUs a `gpus` request gives a container, as Docker's NVIDIA driver
/// picks them: all; the first `n` by index; or the named indices and UUIDs.
/// A named GPU the host does not list is an error.
pub fn selected(all: &[GpuState], gpus: &Gpus) -> Result<Vec<GpuState>, String> {
    match gpus {
        Gpus::All => Ok(all.to_vec()),
        Gpus::Count(n) => {
            let picked: Vec<GpuState> = all.iter().filter(|g| g.index < *n).cloned().collect();
            if picked.len() < *n as usize {
                return Err(format!(
                    "gpus = {n}, but nvidia-smi lists {} GPU(s)",
                    all.len()
                ));
            }
            Ok(picked)
        }
        Gpus::Ids(ids) => ids
            .iter()
            .map(|id| {
                all.iter()
                    .find(|g| g.uuid == *id || g.index.to_string() == *id)
                    .cloned()
                    .ok_or_else(|| {
                        format!("GPU {id:?} is not among the GPUs nvidia-smi lists on this host")
                    })
            })
            .collect(),
    }
}

/// How a wait for free GPUs ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeWait {
    pub waited_s: f64,
    pub gpus: Vec<GpuState>,
}

/// Wait until every GPU `gpus` selects is free (the runtime stopped before
/// has released its memory), looking every `poll`, at most `limit`. On
/// timeout the error names each GPU still in use and by how much.
pub async fn await_free(
    nvidia_smi: &Path,
    gpus: &Gpus,
    limit: Duration,
    poll: Duration,
) -> Result<FreeWait, String> {
    let t0 = Instant::now();
    loop {
        let now = selected(&query(nvidia_smi)?, gpus)?;
        if now.iter().all(GpuState::is_free) {
            return Ok(FreeWait {
                waited_s: t0.elapsed().as_secs_f64(),
                gpus: now,
            });
        }
        if t0.elapsed() >= limit {
            let busy: Vec<String> = now
                .iter()
                .filter(|g| !g.is_free())
                .map(|g| {
                    format!(
                        "GPU {} ({}) holds {} MiB of {} (free means at most {} MiB)",
                        g.index,
                        g.uuid,
                        g.memory_used_mib,
                        g.memory_total_mib,
                        g.free_limit_mib()
                    )
                })
                .collect();
            return Err(format!(
                "after {:.0} s the GPUs are still in use: {}; another process holds them (see nvidia-smi), or the runtime stopped before has not released its memory",
                limit.as_secs_f64(),
                busy.join("; ")
            ));
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "0, GPU-aaaa, NVIDIA H100 80GB HBM3, 570.86.15, 81559, 3\n\
                       1, GPU-bbbb, NVIDIA H100 80GB HBM3, 570.86.15, 81559, 72000\n";

    #[test]
    fn query_lines_are_read_and_bad_ones_named() {
        let g = parse(TWO).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].index, 1);
        assert_eq!(g[1].uuid, "GPU-bbbb");
        assert_eq!(g[1].name, "NVIDIA H100 80GB HBM3");
        assert_eq!(g[1].driver_version, "570.86.15");
        assert_eq!(
            (g[1].memory_total_mib, g[1].memory_used_mib),
            (81559, 72000)
        );
        assert!(g[0].is_free() && !g[1].is_free());
        let e = parse("0, GPU-a, X, 1, [N/A], 3\n").unwrap_err();
        assert!(e.contains("memory.total \"[N/A]\""), "{e}");
        assert!(parse("0, GPU-a\n").unwrap_err().contains("6 comma"));
    }

    #[test]
    fn a_request_selects_the_gpus_dockers_nvidia_driver_gives() {
        let g = parse(TWO).unwrap();
        assert_eq!(selected(&g, &Gpus::All).unwrap().len(), 2);
        let one = selected(&g, &Gpus::Count(1)).unwrap();
        assert_eq!(one.iter().map(|g| g.index).collect::<Vec<_>>(), [0]);
        assert!(
            selected(&g, &Gpus::Count(3))
                .unwrap_err()
                .contains("lists 2")
        );
        let ids = selected(&g, &Gpus::Ids(vec!["GPU-bbbb".into(), "0".into()])).unwrap();
        assert_eq!(ids.iter().map(|g| g.index).collect::<Vec<_>>(), [1, 0]);
        let e = selected(&g, &Gpus::Ids(vec!["GPU-cccc".into()])).unwrap_err();
        assert!(e.contains("\"GPU-cccc\" is not among"), "{e}");
    }

    #[test]
    fn the_free_limit_is_a_share_of_the_memory_with_a_floor() {
        let g = |total, used| GpuState {
            index: 0,
            uuid: "GPU-a".into(),
            name: "x".into(),
            driver_version: "1".into(),
            memory_total_mib: total,
            memory_used_mib: used,
        };
        assert_eq!(g(81_920, 0).free_limit_mib(), 4096);
        assert_eq!(g(4096, 0).free_limit_mib(), FREE_FLOOR_MIB);
        assert!(g(81_920, 4096).is_free());
        assert!(!g(81_920, 4097).is_free());
    }

    /// A stand-in `nvidia-smi`: each call prints the next of `outputs` (the
    /// last one again once they run out), counting its calls in a file.
    fn stand_in(dir: &Path, outputs: &[&str]) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        for (i, o) in outputs.iter().enumerate() {
            std::fs::write(dir.join(format!("out{i}")), o).unwrap();
        }
        let last = outputs.len() - 1;
        let script = dir.join("nvidia-smi");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nd=$(dirname \"$0\")\nn=$(cat \"$d/calls\" 2>/dev/null || echo 0)\n\
                 echo $((n + 1)) > \"$d/calls\"\n[ \"$n\" -gt {last} ] && n={last}\n\
                 [ \"$1\" = '--query-gpu={QUERY}' ] || exit 9\ncat \"$d/out$n\"\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    fn calls(dir: &Path) -> u32 {
        std::fs::read_to_string(dir.join("calls"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[tokio::test]
    async fn a_start_waits_until_the_memory_before_it_is_released() {
        let dir = tempfile::tempdir().unwrap();
        // GPU 1 releases its 72 GB on the third look.
        let smi = stand_in(dir.path(), &[TWO, TWO, &TWO.replace("72000", "100")]);
        let w = await_free(
            &smi,
            &Gpus::Ids(vec!["1".into()]),
            Duration::from_secs(5),
            Duration::from_millis(10),
        )
        .await
        .unwrap();
        assert_eq!(calls(dir.path()), 3);
        assert_eq!(w.gpus[0].memory_used_mib, 100);
        // GPU 0 alone was free from the first look.
        let dir = tempfile::tempdir().unwrap();
        let smi = stand_in(dir.path(), &[TWO]);
        let w = await_free(&smi, &Gpus::Count(1), Duration::ZERO, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!((calls(dir.path()), w.gpus.len()), (1, 1));
    }

    #[tokio::test]
    async fn memory_never_released_ends_at_the_limit_naming_the_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let smi = stand_in(dir.path(), &[TWO]);
        let e = await_free(
            &smi,
            &Gpus::All,
            Duration::from_millis(50),
            Duration::from_millis(10),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("GPU 1 (GPU-bbbb) holds 72000 MiB of 81559 (free means at most 4077 MiB)"),
            "{e}"
        );
        assert!(!e.contains("GPU 0"), "{e}");
        assert!(calls(dir.path()) >= 2, "looked again before giving up");
        let e = await_free(
            Path::new("/nonexistent/nvidia-smi"),
            &Gpus::All,
            Duration::ZERO,
            Duration::ZERO,
        )
        .await
        .unwrap_err();
        assert!(e.starts_with("running /nonexistent/nvidia-smi"), "{e}");
    }
}
