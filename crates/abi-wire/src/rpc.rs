//! Each discovery request type bound to its operation and its response type,
//! so callers and servers name an operation once, by its request type.
//!
//! ```
//! use abi_wire::rpc::{Reply, Rpc};
//! use abi_wire::discovery::Operation;
//! use abi_proto::discovery::v1 as pb;
//!
//! assert_eq!(<pb::RenewRequest as Rpc>::OPERATION, Operation::Renew);
//! let refused = <pb::RenewRequest as Rpc>::Response::with_error(Default::default());
//! assert!(refused.call_error().is_some());
//! ```

use abi_proto::common::v1 as common;
use abi_proto::discovery::v1 as pb;

use crate::discovery::Operation;

/// A discovery request: the operation it names and what answers it.
pub trait Rpc: prost::Message + Default + Clone {
    /// The operation, i.e. the last token of the subject it is sent on.
    const OPERATION: Operation;
    /// The reply type.
    type Response: prost::Message + Default + Reply;
    /// Sets the call envelope (trace id, deadline, principal).
    fn set_context(&mut self, context: common::CallContext);
}

/// A reply that carries a `CallError` when the call was refused.
pub trait Reply: Sized {
    /// The refusal, if the call was refused.
    fn call_error(&self) -> Option<&common::CallError>;
    /// A reply carrying only `error` (every other field at its default), as
    /// the reference sends a refusal.
    fn with_error(error: common::CallError) -> Self;
}

/// `Reply` for response types whose refusal is their `error` field.
macro_rules! reply {
    ($($resp:ty),* $(,)?) => {$(
        impl $crate::rpc::Reply for $resp {
            fn call_error(&self) -> Option<&abi_proto::common::v1::CallError> {
                self.error.as_ref()
            }
            // Some replies hold only the error, so the update is empty for them.
            #[allow(clippy::needless_update)]
            fn with_error(error: abi_proto::common::v1::CallError) -> Self {
                Self {
                    error: Some(error),
                    ..Self::default()
                }
            }
        }
    )*};
}
pub(crate) use reply;

macro_rules! rpc {
    ($($req:ident => $resp:ident, $op:ident;)*) => {$(
        impl Rpc for pb::$req {
            const OPERATION: Operation = Operation::$op;
            type Response = pb::$resp;
            fn set_context(&mut self, context: common::CallContext) {
                self.context = Some(context);
            }
        }
        reply!(pb::$resp);
    )*};
}

rpc! {
    RegisterRequest => RegisterResponse, Register;
    RenewRequest => RenewResponse, Renew;
    UnregisterRequest => UnregisterResponse, Unregister;
    EvictRequest => EvictResponse, Evict;
    GetModuleRequest => GetModuleResponse, GetModule;
    ListModulesRequest => ListModulesResponse, ListModules;
    AuthorizeAgentRequest => AuthorizeAgentResponse, AuthorizeAgent;
    AuthorizeModelRequest => AuthorizeModelResponse, AuthorizeModel;
    AuthorizeAppRequest => AuthorizeAppResponse, AuthorizeApp;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation has exactly one request type.
    #[test]
    fn every_operation_is_bound_once() {
        let bound = [
            <pb::RegisterRequest as Rpc>::OPERATION,
            <pb::RenewRequest as Rpc>::OPERATION,
            <pb::UnregisterRequest as Rpc>::OPERATION,
            <pb::EvictRequest as Rpc>::OPERATION,
            <pb::GetModuleRequest as Rpc>::OPERATION,
            <pb::ListModulesRequest as Rpc>::OPERATION,
            <pb::AuthorizeAgentRequest as Rpc>::OPERATION,
            <pb::AuthorizeModelRequest as Rpc>::OPERATION,
            <pb::AuthorizeAppRequest as Rpc>::OPERATION,
        ];
        for op in Operation::ALL {
            assert_eq!(bound.iter().filter(|b| **b == op).count(), 1, "{op:?}");
        }
    }
}
