//! The web view (docs/web.md): a page that draws a running lab and its live link statistics,
//! built on the public API only. Its files (`web/`: plain HTML, CSS and JavaScript modules, no
//! framework, no build step) are compiled into the binary, so the view works on a lab host
//! with no network. They hold no data, so they are served without the token; every API
//! request the page makes carries it, like any client's.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

/// The policy every file is served with: the page may load only its own files and talk only
/// to this server; nothing inline, no framing, no forms sent elsewhere.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                       img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                       frame-ancestors 'none'";

/// One embedded file: its path, content type and bytes.
struct File {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

/// A JavaScript module of the page, `web/NAME` served as `/ui/NAME`.
macro_rules! module {
    ($name:literal) => {
        File {
            path: concat!("/ui/", $name),
            content_type: "text/javascript; charset=utf-8",
            body: include_str!(concat!("../web/", $name)),
        }
    };
}

/// The page's files. `/` is the page itself; `main.js` imports the other modules.
const FILES: [File; 11] = [
    File {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../web/index.html"),
    },
    module!("main.js"),
    module!("api.js"),
    module!("dom.js"),
    module!("format.js"),
    module!("series.js"),
    module!("topology.js"),
    module!("table.js"),
    module!("details.js"),
    File {
        path: "/ui/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../web/style.css"),
    },
    File {
        path: "/ui/icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../web/icon.svg"),
    },
];

/// The routes of the page's files (GET only; no token needed).
pub fn router() -> Router {
    FILES.iter().fold(Router::new(), |router, file| {
        let (content_type, body) = (file.content_type, file.body);
        router.route(
            file.path,
            get(move || async move {
                (
                    [
                        (header::CONTENT_TYPE, content_type),
                        (header::CONTENT_SECURITY_POLICY, CSP),
                        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                        (header::REFERRER_POLICY, "no-referrer"),
                        // A new binary may bring new files: the browser asks again each time.
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    body,
                )
                    .into_response()
            }),
        )
    })
}

/// The address of the view on the server at `addr` with `token`, preselecting `lab`: the token
/// travels in the fragment, which browsers never send to a server (nor keep in its logs); the
/// page moves it to its session storage and out of the address bar.
pub fn url(addr: std::net::SocketAddr, token: &str, lab: Option<&str>) -> String {
    let mut url = format!("http://{addr}/#token={token}");
    if let Some(lab) = lab {
        url.push_str("&lab=");
        url.push_str(lab);
    }
    url
}

/// Whether the view's address, which holds the token, is printed: when `asked`, else only to a
/// `terminal` and only for a token of this server's own (not `shared`, given by `--token-from`).
/// A log (a journal under systemd, a pod's) keeps what it is given, readable by more than root,
/// and a shared token opens every agent.
pub fn print_url(asked: bool, terminal: bool, shared: bool) -> bool {
    asked || (terminal && !shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_s_url_goes_only_to_a_terminal_unless_asked() {
        assert!(print_url(false, true, false));
        assert!(!print_url(false, false, false), "a journal");
        assert!(!print_url(false, true, true), "a shared token");
        assert!(print_url(true, false, false));
        assert!(print_url(true, false, true));
    }

    #[test]
    fn the_url_carries_the_token_and_the_lab_in_its_fragment() {
        let addr = "127.0.0.1:7780".parse().unwrap();
        assert_eq!(url(addr, "ab12", None), "http://127.0.0.1:7780/#token=ab12");
        assert_eq!(
            url("[::1]:80".parse().unwrap(), "ab12", Some("shaped")),
            "http://[::1]:80/#token=ab12&lab=shaped"
        );
    }

    #[test]
    fn the_page_loads_only_files_that_are_served() {
        let page = FILES[0].body;
        for (attr, quote) in [("src=\"", '"'), ("href=\"", '"')] {
            for part in page.split(attr).skip(1) {
                let target = &part[..part.find(quote).unwrap()];
                assert!(
                    FILES.iter().any(|f| f.path == target),
                    "the page refers to {target}, which is not served"
                );
            }
        }
    }

    #[test]
    fn every_module_a_module_imports_is_served() {
        let modules = FILES.iter().filter(|f| f.path.ends_with(".js"));
        let mut imports = 0;
        for file in modules {
            for part in file.body.split(" from './").skip(1) {
                let target = format!("/ui/{}", &part[..part.find('\'').unwrap()]);
                assert!(
                    FILES.iter().any(|f| f.path == target),
                    "{} imports {target}, which is not served",
                    file.path
                );
                imports += 1;
            }
        }
        // main.js alone imports six.
        assert!(imports >= 6, "{imports} imports found");
    }
}
