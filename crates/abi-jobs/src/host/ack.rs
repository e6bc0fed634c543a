//! Answering a JetStream delivery: nats-py's bytes for each
//! [`abi_wire::jobs::Ack`], on the message's reply subject.

use abi_wire::jobs::Ack;
use async_nats::jetstream::Message;
use bytes::Bytes;
use tracing::warn;

use super::Shared;

/// Answers a delivery (nats-py's bytes for `ack`).
pub(super) async fn reply(shared: &Shared, msg: &Message, ack: Ack) {
    let Some(reply) = &msg.reply else {
        return;
    };
    if let Err(err) = shared
        .links
        .nats
        .publish(reply.clone(), Bytes::copy_from_slice(&ack.body()))
        .await
    {
        warn!(error = %err, "could not acknowledge a job delivery");
    }
}

/// A trigger fetched while the host stops: redeliver it now, elsewhere.
pub(super) async fn hand_back_unstarted(shared: &Shared, msg: &Message) {
    reply(shared, msg, Ack::Nak(None)).await;
}
