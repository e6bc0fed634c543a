//! What the app host answers before an app runs, in the reference's order
//! and words (`naas_abi_sdk.app_host.AppHost._handle` and `_answer`): the
//! refusals that come back as a `CallError` (the app never ran: a gateway
//! may try another instance) and the plain HTTP answers (413, 404). Pure.

use abi_proto::app::v1 as pb;
use abi_sdk_core::CallError;
use abi_wire::ErrorCode;
use abi_wire::apps as wire;

/// A refusal: the reply's `CallError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The wire code.
    pub code: ErrorCode,
    /// The message (`"CODE: text"`, as the reference's `str(RPCError)`).
    pub message: String,
}

impl Refused {
    /// A refusal of the host's own: `"CODE: text"`.
    pub fn rpc(code: ErrorCode, text: &str) -> Self {
        Self {
            code,
            message: format!("{code}: {text}"),
        }
    }

    /// The app failed (or something no code names did): `APP_ERROR`, no
    /// details.
    pub fn app_failed() -> Self {
        Self {
            code: ErrorCode::AppError,
            message: "App failed".to_owned(),
        }
    }

    /// Discovery's refusal of an authorization, as the reference passes it
    /// on; a failure without a code is the host failing.
    pub fn from_authorization(err: &CallError) -> Self {
        match err.code().and_then(ErrorCode::from_wire) {
            Some(code) => Self {
                code,
                message: format!("{code}: {}", err.message()),
            },
            None => Self::app_failed(),
        }
    }

    /// The `CallError` a reply carries.
    pub fn to_pb(&self) -> abi_proto::common::v1::CallError {
        abi_proto::common::v1::CallError {
            code: self.code.as_str().to_owned(),
            message: self.message.clone(),
            retryable: false,
            status: None,
        }
    }
}

/// A plain answer of the host's: a status and a short text body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Text {
    /// The HTTP status.
    pub status: u16,
    /// The `text/plain` body.
    pub message: &'static str,
}

/// What to do with a request that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Answer this.
    Text(Text),
    /// Look for a file first (a `GET`/`HEAD` and an app with a folder),
    /// then [`after_files`].
    Serve {
        /// Whether the folder is looked in first.
        files_first: bool,
    },
}

/// What the host decides as a request arrives, before reading it (the
/// reference's subscription callback): nothing while draining, and an
/// upload only with an upload slot free (waiting for one would hold up the
/// app's other requests). Both refusals carry their text alone, without
/// the code in front, as the reference sends them.
///
/// # Errors
///
/// `MODULE_UNAVAILABLE`.
pub fn on_receive(draining: bool, upload: bool, upload_slot_free: bool) -> Result<(), Refused> {
    let refuse = |text: &str| Refused {
        code: ErrorCode::ModuleUnavailable,
        message: text.to_owned(),
    };
    if draining {
        return Err(refuse("App is draining"));
    }
    if upload && !upload_slot_free {
        return Err(refuse("Too many uploads in progress"));
    }
    Ok(())
}

/// The message itself: at most [`wire::MAX_REQUEST_BYTES`], never an
/// overflow upload.
///
/// # Errors
///
/// `PAYLOAD_TOO_LARGE`.
pub fn check_message(len: usize, overflowed: bool) -> Result<(), Refused> {
    if len > wire::MAX_REQUEST_BYTES || overflowed {
        return Err(Refused::rpc(
            ErrorCode::PayloadTooLarge,
            "Inline app request exceeds 1 MiB",
        ));
    }
    Ok(())
}

/// The decoded request, before authorization: the host still serves, and
/// the request is for this app.
///
/// # Errors
///
/// `MODULE_UNAVAILABLE` while draining, `INVALID_ARGUMENT` for another app.
pub fn check_request(request: &pb::HttpRequest, name: &str, draining: bool) -> Result<(), Refused> {
    if draining {
        return Err(Refused::rpc(
            ErrorCode::ModuleUnavailable,
            "App is draining",
        ));
    }
    if !request.app.is_empty() && request.app != name {
        return Err(Refused::rpc(
            ErrorCode::InvalidArgument,
            "App request names another app",
        ));
    }
    Ok(())
}

/// The authorized caller: only a user caller (the API) may name a user or
/// a workspace.
///
/// # Errors
///
/// `PERMISSION_DENIED`.
pub fn check_caller(request: &pb::HttpRequest, caller: &str) -> Result<(), Refused> {
    let names_user = !request.user_id.is_empty() || !request.workspace_id.is_empty();
    if names_user && !wire::USER_CALLERS.contains(&caller) {
        let text = format!(
            "{} cannot call an app on behalf of a user",
            abi_pyjson::python_str_repr(caller)
        );
        return Err(Refused::rpc(ErrorCode::PermissionDenied, &text));
    }
    Ok(())
}

/// How an authorized request is answered: the body limits (a 413 is an
/// answer, not a refusal), the path and inbox checks, then files or the
/// service.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for a path without its leading `/` or a body inbox
/// that is not an inbox.
pub fn plan(
    request: &pb::HttpRequest,
    upload_limit: u64,
    has_folder: bool,
) -> Result<Plan, Refused> {
    let body = request.body.len();
    if body > wire::MAX_INLINE_REQUEST_BODY {
        return Ok(Plan::Text(Text {
            status: 413,
            message: "Request too large",
        }));
    }
    if u64::try_from(body).unwrap_or(u64::MAX) > upload_limit {
        return Ok(Plan::Text(Text {
            status: 413,
            message: "Request body too large",
        }));
    }
    if !request.path.starts_with('/') {
        return Err(Refused::rpc(
            ErrorCode::InvalidArgument,
            "App path must start with /",
        ));
    }
    if request.body_follows && !wire::is_inbox(&request.body_inbox) {
        return Err(Refused::rpc(
            ErrorCode::InvalidArgument,
            "A body inbox must be an inbox subject",
        ));
    }
    let method = request.method.to_ascii_uppercase();
    Ok(Plan::Serve {
        files_first: has_folder && (method == "GET" || method == "HEAD"),
    })
}

/// After the folder had no file: the service, or 404 without one; with
/// every stream slot taken, `MODULE_UNAVAILABLE`.
///
/// # Errors
///
/// `MODULE_UNAVAILABLE` when `streams_full`.
pub fn after_files(has_service: bool, streams_full: bool) -> Result<Option<Text>, Refused> {
    if !has_service {
        return Ok(Some(Text {
            status: 404,
            message: "Not found",
        }));
    }
    if streams_full {
        return Err(Refused::rpc(
            ErrorCode::ModuleUnavailable,
            "Too many requests in progress",
        ));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request(f: impl FnOnce(&mut pb::HttpRequest)) -> pb::HttpRequest {
        let mut r = pb::HttpRequest {
            app: "ui".into(),
            method: "GET".into(),
            path: "/".into(),
            ..Default::default()
        };
        f(&mut r);
        r
    }

    #[test]
    fn refusals_come_in_the_reference_order_and_words() {
        type Case<'a> = (&'a str, Result<(), Refused>, Option<(ErrorCode, &'a str)>);
        let cases: Vec<Case> = vec![
            // As a request arrives: the text alone, no code in front.
            (
                "arriving while draining, even an upload with no slot",
                on_receive(true, true, false),
                Some((ErrorCode::ModuleUnavailable, "App is draining")),
            ),
            (
                "an upload with every slot taken",
                on_receive(false, true, false),
                Some((ErrorCode::ModuleUnavailable, "Too many uploads in progress")),
            ),
            (
                "a call, the upload slots full",
                on_receive(false, false, false),
                None,
            ),
            ("an upload with a slot", on_receive(false, true, true), None),
            ("fits", check_message(wire::MAX_REQUEST_BYTES, false), None),
            (
                "above the inline cap",
                check_message(wire::MAX_REQUEST_BYTES + 1, false),
                Some((
                    ErrorCode::PayloadTooLarge,
                    "PAYLOAD_TOO_LARGE: Inline app request exceeds 1 MiB",
                )),
            ),
            (
                "an overflow upload",
                check_message(10, true),
                Some((
                    ErrorCode::PayloadTooLarge,
                    "PAYLOAD_TOO_LARGE: Inline app request exceeds 1 MiB",
                )),
            ),
            (
                "draining after it arrived",
                check_request(&request(|_| {}), "ui", true),
                Some((
                    ErrorCode::ModuleUnavailable,
                    "MODULE_UNAVAILABLE: App is draining",
                )),
            ),
            (
                "another app",
                check_request(&request(|r| r.app = "other".into()), "ui", false),
                Some((
                    ErrorCode::InvalidArgument,
                    "INVALID_ARGUMENT: App request names another app",
                )),
            ),
            (
                "no app named",
                check_request(&request(|r| r.app.clear()), "ui", false),
                None,
            ),
            (
                "a module naming a user",
                check_caller(&request(|r| r.user_id = "u1".into()), "billing"),
                Some((
                    ErrorCode::PermissionDenied,
                    "PERMISSION_DENIED: 'billing' cannot call an app on behalf of a user",
                )),
            ),
            (
                "a module naming a workspace",
                check_caller(&request(|r| r.workspace_id = "w".into()), "billing").map(drop),
                Some((
                    ErrorCode::PermissionDenied,
                    "PERMISSION_DENIED: 'billing' cannot call an app on behalf of a user",
                )),
            ),
            (
                "the API naming a user",
                check_caller(&request(|r| r.user_id = "u1".into()), "api"),
                None,
            ),
        ];
        for (what, got, want) in cases {
            let got = got.err().map(|r| (r.code, r.message));
            let want = want.map(|(c, m)| (c, m.to_owned()));
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn a_request_is_planned_by_its_body_path_inbox_and_method() {
        let text = |status, message| Ok(Plan::Text(Text { status, message }));
        let big = vec![0; wire::MAX_INLINE_REQUEST_BODY + 1];
        assert_eq!(
            plan(&request(|r| r.body = big), u64::MAX, true),
            text(413, "Request too large")
        );
        assert_eq!(
            plan(&request(|r| r.body = vec![0; 11]), 10, true),
            text(413, "Request body too large")
        );
        assert_eq!(
            plan(&request(|r| r.path = "x".into()), 10, true)
                .unwrap_err()
                .code,
            ErrorCode::InvalidArgument
        );
        let follows = |inbox: &str| {
            let inbox = inbox.to_owned();
            request(move |r| {
                r.body_follows = true;
                r.body_inbox = inbox;
            })
        };
        assert_eq!(
            plan(&follows("abi.x"), 10, true).unwrap_err().message,
            "INVALID_ARGUMENT: A body inbox must be an inbox subject"
        );
        assert_eq!(
            plan(&follows("_INBOX.a"), 10, true),
            Ok(Plan::Serve { files_first: true })
        );
        assert_eq!(
            plan(&request(|r| r.method = "head".into()), 10, true),
            Ok(Plan::Serve { files_first: true })
        );
        assert_eq!(
            plan(&request(|r| r.method = "POST".into()), 10, true),
            Ok(Plan::Serve { files_first: false })
        );
        assert_eq!(
            plan(&request(|_| {}), 10, false),
            Ok(Plan::Serve { files_first: false })
        );
        assert_eq!(
            after_files(false, true),
            Ok(Some(Text {
                status: 404,
                message: "Not found"
            }))
        );
        assert_eq!(
            after_files(true, true).unwrap_err().code,
            ErrorCode::ModuleUnavailable
        );
        assert_eq!(after_files(true, false), Ok(None));
    }
}
