use super::*;

#[test]
fn redacts_userinfo_and_secret_query_values() {
    let url = Url::parse("https://u:p@h.example/x?env=prod&access_token=abc&apiKey=k").unwrap();
    assert_eq!(
        redact_url(&url),
        "https://***@h.example/x?env=prod&access_token=***&apiKey=***"
    );
    let source = HttpSource::builder("https://u:pw@h.example/x")
        .bearer_token("tok")
        .build()
        .unwrap();
    let debug = format!("{source:?}");
    assert!(!debug.contains("pw") && !debug.contains("tok"), "{debug}");
    let builder = HttpSource::builder("https://u:pw@h.example/x");
    assert!(!format!("{builder:?}").contains("pw"));
    let url = Url::parse("https://tok@h.example/").unwrap();
    assert_eq!(redact_url(&url), "https://***@h.example/");
    let url = Url::parse("http://h.example:8080/tasks.json").unwrap();
    assert_eq!(redact_url(&url), "http://h.example:8080/tasks.json");
}

#[test]
fn a_password_the_parser_misreads_is_still_hidden() {
    // An unencoded `/` makes the parser see host `u`, port 12 and a path holding the rest.
    let url = Url::parse("http://u:12/34@h.example/x").unwrap();
    assert_eq!(redact_url(&url), "http://u:***@h.example/x");
    assert_eq!(
        redact("http://u:pa/ss@h.example/x"),
        "<unparseable URL with credentials>"
    );
}

#[test]
fn an_unparseable_url_is_never_shown_as_written() {
    for (location, secret) in [
        ("https://cfg.example:99999/tasks.json?api_key=k3y", "k3y"),
        ("https://cfg.example:99999/tasks.json?token=t0k&x=1", "t0k"),
        ("https://[::1/tasks.json?sig=s1g", "s1g"),
        ("https://tok3n@[::1/tasks.json", "tok3n"),
    ] {
        let error = HttpSource::builder(location)
            .build()
            .unwrap_err()
            .to_string();
        assert!(!error.contains(secret), "{error}");
        assert!(!redact(location).contains(secret), "{location}");
    }
}

#[test]
fn redirects_stay_within_the_origin() {
    let configured = Url::parse("https://cfg.example/app/tasks.json").unwrap();
    let url = |s: &str| Url::parse(s).unwrap();
    for same in [
        "https://cfg.example/app/v2/tasks.json",
        "https://CFG.example:443/other?x=1",
    ] {
        assert_eq!(check_redirect(&configured, &url(same), 1), Ok(()), "{same}");
    }
    assert_eq!(
        check_redirect(&configured, &url("https://cfg.example/x"), MAX_REDIRECTS),
        Ok(())
    );
    assert_eq!(
        check_redirect(
            &configured,
            &url("https://cfg.example/x"),
            MAX_REDIRECTS + 1
        ),
        Err(RedirectRefusal::TooMany)
    );
    for other in [
        "http://cfg.example/app/tasks.json",
        "https://cfg.example:8443/app/tasks.json",
        "https://cdn.cfg.example/app/tasks.json",
        "https://evil.example/app/tasks.json",
    ] {
        let refusal = check_redirect(&configured, &url(other), 1).unwrap_err();
        let message = refusal.to_string();
        assert!(message.contains(other), "{message}");
        assert!(message.contains("https://cfg.example"), "{message}");
        assert!(
            message.contains("point SCHEDULER_CONFIG at the final URL"),
            "{message}"
        );
    }
    // The target is shown redacted.
    let refusal = check_redirect(
        &configured,
        &url("https://u:pw@evil.example/t?token=abc&env=prod"),
        1,
    )
    .unwrap_err();
    assert_eq!(
        refusal,
        RedirectRefusal::OtherOrigin {
            target: "https://***@evil.example/t?token=***&env=prod".to_owned(),
            origin: "https://cfg.example".to_owned(),
        }
    );
}

#[test]
fn credentials_in_clear_only_over_http_to_a_host_that_is_not_loopback() {
    let in_clear = |url: &str, has_credentials| {
        credentials_travel_in_clear(&Url::parse(url).unwrap(), has_credentials)
    };
    for url in [
        "http://config.example/t",
        "http://10.0.0.7:8080/t",
        "http://[2001:db8::1]/t",
        "http://localhost.example/t",
    ] {
        assert!(in_clear(url, true), "{url}");
        assert!(!in_clear(url, false), "{url}");
    }
    for url in [
        "https://config.example/t",
        "http://localhost:8080/t",
        "http://LOCALHOST/t",
        "http://127.0.0.1/t",
        "http://127.3.2.1:9/t",
        "http://[::1]:8080/t",
        "http://[::ffff:127.0.0.1]/t",
    ] {
        assert!(!in_clear(url, true), "{url}");
    }
}

#[test]
fn invalid_header_is_reported_by_build() {
    let err = HttpSource::builder("http://127.0.0.1/x")
        .header("bad header", "v")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("bad header"), "{err}");
    let err = HttpSource::builder("ftp://h/x").build().unwrap_err();
    assert!(err.to_string().contains("http://"), "{err}");
}
