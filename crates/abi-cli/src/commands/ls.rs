//! `abictl ls`: every live instance; with `--watch`, a live table drawn
//! again at each registry change until Ctrl-C (or `--for`).

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use abi_sdk::{RegistryWatch, WatchOptions, pb};
use futures::{Stream, StreamExt as _};

use super::{Ctx, list_all, major_of, module_of};
use crate::connect;
use crate::output::{Table, clock, expires_in, or_dash, print_json};
use crate::signals;
use crate::snapshot::now_epoch;

/// How often a live table on a terminal is drawn again with no change (its
/// lease countdowns move).
const REFRESH: Duration = Duration::from_secs(2);
/// Changes closer together than this are drawn once.
const SETTLE: Duration = Duration::from_millis(50);
/// A burst is drawn at most this long after its first change: a large
/// fleet's lease renewals may never leave a [`SETTLE`] gap.
const SETTLE_AT_MOST: Duration = Duration::from_millis(500);

/// Lists every live instance as a table (or JSON).
///
/// # Errors
///
/// The service call failed.
///
/// # Cancel safety
///
/// Cancel safe: it only lists instances; the table is printed after the last await.
pub async fn run(cx: Ctx<'_>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = list_all(&client).await?;
    if cx.global.json {
        print_json(&serde_json::to_value(&instances)?);
        return Ok(());
    }
    print!("{}", table(&instances, now_epoch()).render(cx.style));
    Ok(())
}

/// Draws the `ls` table, then again after each registry change (and every
/// [`REFRESH`] on a terminal, which is cleared first; elsewhere each table
/// follows a `--- HH:MM:SS` line), until Ctrl-C or `for_secs`.
///
/// # Errors
///
/// The service call failed.
///
/// # Cancel safety
///
/// Cancel safe: dropping it drops the registry watch and its subscription; each table is written
/// whole between awaits, so none is cut short.
pub async fn watch(cx: Ctx<'_>, for_secs: Option<f64>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    // One connection for the lookups and the watch.
    let nats = client
        .nats()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the watch needs a NATS connection"))?;
    let mut changes = RegistryWatch::new(nats, &cx.global.project, WatchOptions::default());
    let terminal = std::io::stdout().is_terminal() && !cx.global.json;
    let until = signals::after(for_secs);
    tokio::pin!(until);
    let stop = signals::interrupted();
    tokio::pin!(stop);
    loop {
        let instances = list_all(&client).await?;
        let now = now_epoch();
        let text = if cx.global.json {
            format!("{}\n", serde_json::to_string(&instances)?)
        } else {
            let table = table(&instances, now).render(cx.style);
            if terminal {
                format!(
                    "\x1b[H\x1b[2Jabictl ls --watch  {}  (Ctrl-C stops)\n\n{table}",
                    clock(now)
                )
            } else {
                format!("--- {}\n{table}", clock(now))
            }
        };
        // A reader that went away (a closed pipe) ends the watch quietly.
        let mut out = std::io::stdout().lock();
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return Ok(());
        }
        drop(out);
        let refresh = async {
            if terminal {
                tokio::time::sleep(REFRESH).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = &mut stop => return Ok(()),
            () = &mut until => return Ok(()),
            () = refresh => {}
            change = changes.next() => {
                if change.is_none() {
                    return Ok(());
                }
                // A burst (a rollout) is drawn once.
                settle(&mut changes).await;
            }
        }
    }
}

/// Takes the changes that follow each other within [`SETTLE`], for at most
/// [`SETTLE_AT_MOST`].
///
/// # Cancel safety
///
/// Cancel safe: a change taken is only dropped, as it would be here.
async fn settle<S: Stream + Unpin>(changes: &mut S) {
    let at_most = tokio::time::Instant::now() + SETTLE_AT_MOST;
    loop {
        let next = (tokio::time::Instant::now() + SETTLE).min(at_most);
        match tokio::time::timeout_at(next, changes.next()).await {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

/// The `ls` table of `instances` at `now`.
pub fn table(instances: &[pb::Instance], now: f64) -> Table {
    let mut table = Table::new(&[
        "MODULE",
        "MAJOR",
        "INSTANCE",
        "STATUS",
        "ROLLOUT",
        "VERSION",
        "EXPIRES IN",
    ]);
    for i in instances {
        let version = i
            .descriptor
            .as_ref()
            .map(|d| d.package_version.as_str())
            .unwrap_or("");
        table.status_row(
            vec![
                module_of(i).to_owned(),
                major_of(i).to_string(),
                i.instance_id.clone(),
                i.status.clone(),
                or_dash(&i.rollout_id),
                or_dash(version),
                expires_in(i.expires_at, now),
            ],
            3,
        );
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changes that never leave a gap of [`SETTLE`] (a large fleet's
    /// renewals) are drawn after [`SETTLE_AT_MOST`], not never.
    #[tokio::test(start_paused = true)]
    async fn a_burst_without_a_gap_settles_within_its_bound() {
        let mut changes = Box::pin(futures::stream::unfold((), |()| async {
            tokio::time::sleep(SETTLE / 5).await;
            Some(((), ()))
        }));
        let started = tokio::time::Instant::now();
        let settled = tokio::time::timeout(SETTLE_AT_MOST * 2, settle(&mut changes)).await;
        assert!(
            settled.is_ok(),
            "still settling after {:?}",
            started.elapsed()
        );
        assert_eq!(started.elapsed(), SETTLE_AT_MOST);
    }

    /// A lone change is drawn after [`SETTLE`] without another.
    #[tokio::test(start_paused = true)]
    async fn a_quiet_watch_settles_after_one_gap() {
        let mut changes = futures::stream::pending::<()>();
        let started = tokio::time::Instant::now();
        settle(&mut changes).await;
        assert_eq!(started.elapsed(), SETTLE);
    }
}
