//! A module started with the key of another module id: discovery refuses
//! its token (`UNAUTHENTICATED`, the reference's "Missing or invalid service
//! token"), and the runner's error says what to check, naming the command
//! that prints the right key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_of_another_module_is_named_as_the_likely_cause() {
    let world = World::start(5.0).await;
    let other = abi_auth::module_key(abi_sdk_e2e::SECRET, "rs_other").unwrap();
    let mut module = world.spawn("rs_wrongkey", &[("ABI_MODULE_KEY", &other)]);
    let exit = module.expect("exit error").await;
    assert!(exit.contains("Register"), "{exit}");
    assert!(
        exit.contains("`abictl key rs_wrongkey`") && exit.contains("the key of another module id"),
        "{exit}"
    );
    assert!(!module.wait().await.success());
}
