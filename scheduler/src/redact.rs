//! Redaction of secrets (placeholder until the secrets branch lands).

/// Removes the password from a database URL.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let pass_start = rest_start + colon + 1;
                out.replace_range(pass_start..rest_start + at, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let redacted: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out = format!("{head}{}", redacted.join("&"));
    }
    out
}

/// Redacts URLs inside a text.
pub fn redact_text(text: &str) -> String { text.split(" ").map(redact_url).collect::<Vec<_>>().join(" ") }
