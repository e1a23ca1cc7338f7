//! The web dashboard, served by the admin server at `/`: one HTML page, a stylesheet and plain
//! JavaScript modules (no build step, no framework), all embedded in the binary. The page reads
//! the JSON API it sits beside (`/api/...`) and nothing else: every answer here carries a strict
//! Content-Security-Policy (no inline script or style, no other origin), so the page cannot load
//! or send anything elsewhere even if a task name or an error message carried markup.
//!
//! What the page shows and does is the API's: this module owns only the assets and how they are
//! served. Reading the page is open like any read of the API; its actions send the admin token
//! the operator enters (kept in the browser's session storage).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::state::AdminState;

/// The policy of every dashboard answer: this origin's scripts, styles and API only.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'none'; \
     object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file the page loads (`/assets/<name>`); `index.html` is also `/`.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("dashboard.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("format.js", JS),
    asset!("charts.js", JS),
    asset!("overview.js", JS),
    asset!("task.js", JS),
    asset!("instances.js", JS),
    asset!("runs.js", JS),
    asset!("cluster.js", JS),
    asset!("actions.js", JS),
];

/// The dashboard's routes: `/` and `/assets/{name}` (kept out of the OpenAPI document, which
/// describes the API).
pub(crate) fn router() -> axum::Router<AdminState> {
    axum::Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
}

fn serve(asset: &Asset) -> Response {
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    secure(headers);
    // Assets change with the binary; a page open across an upgrade asks again.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn secure(headers: &mut axum::http::HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

async fn index() -> Response {
    serve(&ASSETS[0])
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset),
        None => {
            let mut response = (
                StatusCode::NOT_FOUND,
                axum::Json(super::error::ErrorBody {
                    error: "not_found",
                    message: format!("no dashboard asset `{name}`"),
                }),
            )
                .into_response();
            secure(response.headers_mut());
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assets_load_nothing_from_elsewhere_and_nothing_inline() {
        for asset in ASSETS {
            for needle in ["http://", "https://", "//cdn", "@import"] {
                // The SVG namespace is an identifier, not a fetch.
                let body = asset.body.replace("http://www.w3.org/2000/svg", "");
                assert!(!body.contains(needle), "{} contains {needle}", asset.name);
            }
        }
        let html = ASSETS[0].body;
        assert!(
            !html.contains("<script>") && !html.contains("style="),
            "no inline code"
        );
        for asset in &ASSETS[1..] {
            if asset.name != "index.html" && asset.name != "favicon.svg" {
                let link = format!("/assets/{}", asset.name);
                let linked = ASSETS.iter().any(|a| a.body.contains(&link))
                    || ASSETS
                        .iter()
                        .any(|a| a.body.contains(&format!("./{}", asset.name)));
                assert!(linked, "{} is served but never loaded", asset.name);
            }
        }
    }
}
