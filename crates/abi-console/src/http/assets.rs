//! The page and what it loads, built into the binary: one HTML shell for
//! every view (the address names the view; the script draws it), the
//! script and the style. Nothing is fetched from anywhere else.

use abi_wire::jobs::RunStatus;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

use super::State;

const SHELL: &str = include_str!("../../assets/index.html");
const SCRIPT: &str = include_str!("../../assets/console.js");
const STYLE: &str = include_str!("../../assets/console.css");

/// The text of the HTML shell for `project`: what the script needs to know
/// besides the API (whether actions are on, the run statuses) rides in
/// `<meta>` tags.
pub fn shell(project: &str, allow_actions: bool) -> String {
    let names = |keep: &dyn Fn(RunStatus) -> bool| {
        RunStatus::ALL
            .iter()
            .copied()
            .filter(|s| keep(*s))
            .map(RunStatus::as_str)
            .collect::<Vec<_>>()
            .join(",")
    };
    let statuses = names(&|_| true);
    // What a cancel can still stop (a queued run has no record to select by).
    let open = names(&|s| !s.is_terminal() && s != RunStatus::Queued);
    let head = format!(
        "<meta name=\"abi-run-statuses\" content=\"{statuses}\">\n<meta name=\"abi-open-statuses\" content=\"{open}\">\n</head>"
    );
    SHELL
        .replace("{{project}}", &escape(project))
        .replace("{{actions}}", if allow_actions { "on" } else { "off" })
        .replacen("</head>", &head, 1)
}

/// Every page: the shell.
pub async fn page(state: State) -> Html<String> {
    Html(shell(state.client.project(), state.options.allow_actions))
}

/// The page script.
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// The page style.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Text safe inside HTML and its attributes.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_names_the_project_and_the_statuses() {
        let page = shell("demo<x>", true);
        assert!(page.contains("<title>abi console · demo&lt;x&gt;</title>"));
        assert!(page.contains(r#"<meta name="abi-actions" content="on">"#));
        assert!(page.contains(RunStatus::TimedOut.as_str()));
        let open = format!(
            r#"<meta name="abi-open-statuses" content="{},{}">"#,
            RunStatus::Running.as_str(),
            RunStatus::Retrying.as_str()
        );
        assert!(page.contains(&open), "{page}");
        assert!(shell("p", false).contains(r#"content="off""#));
    }
}
