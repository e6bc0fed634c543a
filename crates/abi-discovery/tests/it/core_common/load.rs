//! A background load of registrations for the fault tests, tallying what
//! was acknowledged, refused and left unknown.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use abi_discovery::discovery::Discovery;
use abi_registry::ErrorCode;

use super::{OWNER, register};

/// What the load saw, by instance id.
#[derive(Debug, Default)]
pub struct Seen {
    /// Acknowledged: must be stored.
    pub acked: BTreeSet<String>,
    /// `UNAVAILABLE` (timeout or store error): stored or not.
    pub unknown: BTreeSet<String>,
    /// `REGISTRY_BUSY`: certainly not stored.
    pub busy: BTreeSet<String>,
}

/// Callers registering fresh instances in a loop until stopped.
pub struct Load {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts `callers` concurrent callers on `discovery`.
    pub fn start(discovery: &Discovery, callers: usize) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..callers)
            .map(|c| {
                let (d, seen, stop) = (discovery.clone(), seen.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let id = format!("load-{c}-{n}");
                        n += 1;
                        let result = d.mutate(register(&id), OWNER).await;
                        let mut seen = seen.lock().unwrap();
                        match result {
                            Ok(_) => seen.acked.insert(id),
                            Err(e) if e.code() == ErrorCode::Unavailable => seen.unknown.insert(id),
                            Err(e) if e.code() == ErrorCode::RegistryBusy => seen.busy.insert(id),
                            Err(e) => panic!("register {id}: {e}"),
                        };
                    }
                })
            })
            .collect();
        Self { seen, stop, tasks }
    }

    /// How many registrations were acknowledged so far.
    pub fn acked(&self) -> usize {
        self.seen.lock().unwrap().acked.len()
    }

    /// Stops the callers and returns the tally.
    pub async fn finish(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            task.await.unwrap();
        }
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// Checks a stored set of ids against the tally: everything acknowledged is
/// there, and nothing that was refused or never sent.
pub fn check(stored: &BTreeSet<String>, seen: &Seen) {
    let missing: Vec<_> = seen.acked.difference(stored).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    let extra: Vec<_> = stored
        .iter()
        .filter(|id| !seen.acked.contains(*id) && !seen.unknown.contains(*id))
        .collect();
    assert!(extra.is_empty(), "stored but never acknowledged: {extra:?}");
}
