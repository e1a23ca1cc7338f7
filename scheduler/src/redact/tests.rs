use super::*;
use proptest::prelude::*;

#[test]
fn urls() {
    let cases = [
        // (input, expected)
        (
            "postgres://app:s3cret@db.example:5432/x",
            "postgres://app:***@db.example:5432/x",
        ),
        (
            "postgres://app:s3cr:et@db.example:5432/x?sslmode=disable",
            "postgres://app:***@db.example:5432/x?sslmode=disable",
        ),
        (
            "postgres://app:pa/ss?w#o@rd@db:5432/x",
            "postgres://app:***@db:5432/x",
        ),
        ("postgres://app:p@ss@db/x", "postgres://app:***@db/x"),
        ("postgres://app:p%40ss@db/x", "postgres://app:***@db/x"),
        ("postgres://app:a b c@db/x", "postgres://app:***@db/x"),
        // An unencoded `@` in the user name.
        ("postgres://me@corp:pw@db/x", "postgres://me@corp:***@db/x"),
        (
            "  postgresql://app:pw@[::1]:5432/x",
            "  postgresql://app:***@[::1]:5432/x",
        ),
        ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
        // Multi-host (libpq), both schemes, and the password in the query as well.
        (
            "postgres://app:s3cret@h1:5432,h2:5433/db?target_session_attrs=read-write",
            "postgres://app:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
        ),
        (
            "postgresql://app:s3%2Fcr%40et@h1,h2/db?password=s4&sslmode=require",
            "postgresql://app:***@h1,h2/db?password=***&sslmode=require",
        ),
        (
            "https://deploy:t0k@config.example/tasks.json",
            "https://deploy:***@config.example/tasks.json",
        ),
        // No password: unchanged.
        (
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://postgres@127.0.0.1:5432/test",
        ),
        ("postgres://app:@db/x", "postgres://app:@db/x"),
        ("postgres://db:5432/x", "postgres://db:5432/x"),
        ("postgres:///x?host=/run/pg", "postgres:///x?host=/run/pg"),
        ("http://h.example/a:b", "http://h.example/a:b"),
        // An `@` after the host: over-redacted, never under.
        (
            "postgres://app:pw@db/x?application_name=a@b",
            "postgres://app:***@b",
        ),
        ("postgres://db:5432/x?email=a@b", "postgres://db:***@b"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_url(input), expected, "input: {input}");
    }
}

#[test]
fn query_parameters() {
    let cases = [
        (
            "postgres://app@h/x?password=hunter2&sslmode=disable",
            "postgres://app@h/x?password=***&sslmode=disable",
        ),
        (
            "postgres://h/x?sslmode=verify-full&sslpassword=k3y",
            "postgres://h/x?sslmode=verify-full&sslpassword=***",
        ),
        (
            "postgres://h/x?PassWord=a&DB_PASSWD=b&client_secret=c&access_token=d&env=prod",
            "postgres://h/x?PassWord=***&DB_PASSWD=***&client_secret=***&access_token=***&env=prod",
        ),
        // Percent-encoded names (`%77` is `w`, `%5F` is `_`) and values.
        (
            "postgres://h/x?pass%77ord=a%26b&ssl%5Fpassword=c",
            "postgres://h/x?pass%77ord=***&ssl%5Fpassword=***",
        ),
        // Unencoded `&`, `#` and `=` inside a secret value: hidden up to the next `&name=`.
        (
            "postgres://h/x?password=a&b#c=d&sslmode=require",
            "postgres://h/x?password=***&sslmode=require",
        ),
        ("postgres://h/x?token=a&b#frag", "postgres://h/x?token=***"),
        // Both forms at once, and a `?` in the user-info password.
        (
            "postgres://app:p?w@h/x?password=q",
            "postgres://app:***@h/x?password=***",
        ),
        // Not secret, empty, or in the fragment: unchanged.
        (
            "postgres://h/x?sslmode=require&application_name=jobs#password=x",
            "postgres://h/x?sslmode=require&application_name=jobs#password=x",
        ),
        ("postgres://h/x?password=", "postgres://h/x?password="),
        // Webhook and API styles: keys, signatures, credentials.
        (
            "https://hooks.example/x?api_key=k1&Signature=s2&sig=s3&X-Amz-Credential=c4&page=2",
            "https://hooks.example/x?api_key=***&Signature=***&sig=***&X-Amz-Credential=***&page=2",
        ),
        ("postgres://h/x?password", "postgres://h/x?password"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_url(input), expected, "input: {input}");
    }
}

#[test]
fn keyword_value_strings() {
    let cases = [
        (
            "host=db user=app password=secret dbname=x",
            "host=db user=app password=*** dbname=x",
        ),
        (
            "host=db password = 'it''s s3cret' dbname=x",
            "host=db password = '***' dbname=x",
        ),
        (
            r"host=db password='a b\' c' dbname=x",
            "host=db password='***' dbname=x",
        ),
        (
            r"host=db password='back\\slash' dbname=x",
            "host=db password='***' dbname=x",
        ),
        (
            r"host=db password=un\ quoted\'s dbname=x",
            "host=db password=*** dbname=x",
        ),
        (
            "HOST=db PassWord=Secret SSLPASSWORD='k 3y' dbname=x",
            "HOST=db PassWord=*** SSLPASSWORD='***' dbname=x",
        ),
        (
            "sslpassword=k3y sslmode=require",
            "sslpassword=*** sslmode=require",
        ),
        ("password=\tsecret", "password=\t***"),
        // Unterminated quote: hidden to the end.
        ("password='never closed dbname=x", "password='***'"),
        // Empty: nothing to hide.
        ("password='' dbname=x", "password='' dbname=x"),
        ("password= ", "password= "),
        // No secret keyword: unchanged.
        ("host=db user=app dbname=x", "host=db user=app dbname=x"),
        // A key that merely contains a hint counts as secret: over-redacted, never under.
        ("passwordless=true", "passwordless=***"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_url(input), expected, "input: {input}");
    }
}

#[test]
fn text() {
    let cases = [
        (
            "`postgres://app:s3cret@db:5432/x` is not a usable PostgreSQL URL: invalid port",
            "`postgres://app:***@db:5432/x` is not a usable PostgreSQL URL: invalid port",
        ),
        // A secret value at the end of a URL in text runs to the whitespace, `)` included.
        (
            "error sending request for url (https://u:pw@h.example/t?token=abc)",
            "error sending request for url (https://u:***@h.example/t?token=***",
        ),
        (
            "jdbc:postgresql://h/x?user=app&password=pw next",
            "jdbc:postgresql://h/x?user=app&password=*** next",
        ),
        // A space in a URL password: the URL runs to the last `@` of the line.
        (
            "failed: postgres://app:a b@db/x: refused\nnext line a@b",
            "failed: postgres://app:***@db/x: refused\nnext line a@b",
        ),
        // Two URLs in one message are redacted separately.
        (
            "from http://a:1@h1/x to http://b:2@h2/y",
            "from http://a:***@h1/x to http://b:***@h2/y",
        ),
        (
            "PGPASSWORD=hunter2 psql --token=t0k -h db",
            "PGPASSWORD=*** psql --token=*** -h db",
        ),
        (
            r#"config: password="a \" b" db.password=c, api_secret = 'd e'."#,
            r#"config: password="***" db.password=*** api_secret = '***'."#,
        ),
        (
            "le mot de passe épassword=x",
            "le mot de passe épassword=***",
        ),
        // Words that merely contain a hint, without `=`, are text.
        (
            "password authentication failed for user \"app\"; token expired",
            "password authentication failed for user \"app\"; token expired",
        ),
        (
            "http://127.0.0.1:8080/tasks: 500",
            "http://127.0.0.1:8080/tasks: 500",
        ),
        ("", ""),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_text(input), expected, "input: {input}");
    }
}

#[test]
fn bearer_labels_and_json_fields() {
    let cases = [
        // Authorization headers, as logged by hand or by an HTTP client's `Debug`.
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
            "Authorization: Bearer ***",
        ),
        (
            "authorization: basic dXNlcjpwYXNz",
            "authorization: basic ***",
        ),
        (
            "Proxy-Authorization:Bearer t0k3n!",
            "Proxy-Authorization:Bearer ***",
        ),
        (
            r#"headers: {"authorization": "Bearer t0k3n", "accept": "*/*"}"#,
            r#"headers: {"authorization": "***", "accept": "*/*"}"#,
        ),
        ("X-Api-Key: k3y-value next", "X-Api-Key: *** next"),
        ("Cookie: session=abc; theme=dark", "Cookie: *** theme=dark"),
        // Bearer credentials anywhere, and a JWT on its own.
        (
            "calling with bearer abc.def-ghi_jkl~mno+/= then",
            "calling with bearer *** then",
        ),
        ("curl -H 'Bearer xyz' /x", "curl -H 'Bearer ***' /x"),
        ("send `Bearer <token>`", "send `Bearer ***`"),
        (
            "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl expired",
            "token *** expired",
        ),
        // `key: value` (YAML, Rust's `Debug`).
        ("password: hunter2", "password: ***"),
        ("db_password : 'a b c' ok", "db_password : '***' ok"),
        (
            r#"Config { user: "app", password: "hun\"ter2", port: 5432 }"#,
            r#"Config { user: "app", password: "***", port: 5432 }"#,
        ),
        ("client_secret:s3 rest", "client_secret:*** rest"),
        // JSON fields named like secrets, any value.
        (
            r#"{"user":"app","password":"hunter2","api_key":12345,"tokens":["a","b"],"n":1}"#,
            r#"{"user":"app","password":"***","api_key":***,"tokens":[***],"n":1}"#,
        ),
        (
            r#"{'password': 'x y', 'refresh_token': null}"#,
            r#"{'password': '***', 'refresh_token': ***}"#,
        ),
        // Nested: the object is not hidden whole, its secret fields are.
        (
            r#"{"credentials": {"user": "u", "secret": "s"}}"#,
            r#"{"credentials": {"user": "u", "secret": "***"}}"#,
        ),
        // JSON inside an escaped string (a `Debug`ged body).
        (
            r#"body="{\"password\":\"hunter2\",\"user\":\"app\"}""#,
            r#"body="{\"password\":\"***\",\"user\":\"app\"}""#,
        ),
        // The `=` forms.
        ("api_key=k1 apikey = k2", "api_key=*** apikey = ***"),
        // Labels that do not name a secret, paths and empty values: unchanged.
        ("keyword: select", "keyword: select"),
        ("author: Jane", "author: Jane"),
        ("password::hash(x)", "password::hash(x)"),
        ("password:", "password:"),
        ("password: \nnext", "password: \nnext"),
        (r#"{"password": ""}"#, r#"{"password": ""}"#),
        ("the bearer", "the bearer"),
        ("error: timed out", "error: timed out"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_text(input), expected, "input: {input}");
    }
}

/// Printable ASCII, space, quotes, backslash and URL delimiters included.
fn password() -> impl Strategy<Value = String> {
    "[ -~]{1,24}"
}

/// `pw` quoted for a libpq keyword/value string.
fn libpq_quoted(pw: &str) -> String {
    format!("'{}'", pw.replace('\\', r"\\").replace('\'', r"\'"))
}

/// `pw` unquoted for a libpq keyword/value string: whitespace, quotes and `\` escaped.
fn libpq_unquoted(pw: &str) -> String {
    pw.chars()
        .flat_map(|c| {
            let escape = c == '\\' || c == '\'' || c == '"' || c.is_whitespace();
            escape.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// The honest check: the output must be exactly `expected`, which does not depend on the
/// password, so it carries nothing of it. "Does not contain the password" is checked too,
/// unless the password is short or happens to be a piece of the fixed text around it (a
/// password of `5432` is in `h:5432` whatever the redactor does).
fn assert_hidden(output: &str, expected: &str, pw: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(output, expected);
    if pw.len() >= 4 && !expected.contains(pw) {
        prop_assert!(!output.contains(pw));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn url_passwords_never_show(pw in password(), query in prop::bool::ANY) {
        let query = if query { "?sslmode=require&application_name=jobs" } else { "" };
        let url = format!("postgres://u:{pw}@h:5432/db{query}");
        assert_hidden(&redact_url(&url), &format!("postgres://u:***@h:5432/db{query}"), &pw)?;
    }

    #[test]
    fn query_passwords_never_show(pw in password()) {
        let encoded = percent_encoding::utf8_percent_encode(&pw, percent_encoding::NON_ALPHANUMERIC);
        let url = format!("postgres://h:5432/db?password={encoded}&sslmode=require");
        assert_hidden(&redact_url(&url), "postgres://h:5432/db?password=***&sslmode=require", &pw)?;
    }

    #[test]
    fn keyword_passwords_never_show(pw in password()) {
        let dsn = format!("host=h user=u password={} dbname=db", libpq_quoted(&pw));
        assert_hidden(&redact_url(&dsn), "host=h user=u password='***' dbname=db", &pw)?;
        let dsn = format!("host=h password={} dbname=db", libpq_unquoted(&pw));
        assert_hidden(&redact_url(&dsn), "host=h password=*** dbname=db", &pw)?;
    }

    #[test]
    fn json_and_debug_secrets_never_show(pw in password()) {
        let json = serde_json::json!({"user": "u", "password": pw}).to_string();
        assert_hidden(
            &redact_text(&format!("request body: {json}")),
            r#"request body: {"password":"***","user":"u"}"#,
            &pw,
        )?;
        // The same document quoted again (a `Debug`ged string of it).
        let escaped = format!("body={:?}", json);
        assert_hidden(
            &redact_text(&escaped),
            r#"body="{\"password\":\"***\",\"user\":\"u\"}""#,
            &pw,
        )?;
        let debug = format!("Login {{ user: \"u\", password: {pw:?} }}");
        assert_hidden(&redact_text(&debug), r#"Login { user: "u", password: "***" }"#, &pw)?;
    }

    #[test]
    fn bearer_tokens_never_show(token in "[A-Za-z0-9._~+/-]{1,40}=*") {
        let line = format!("GET /x Authorization: Bearer {token} (attempt 2)");
        assert_hidden(&redact_text(&line), "GET /x Authorization: Bearer *** (attempt 2)", &token)?;
        let line = format!("sent bearer {token}");
        assert_hidden(&redact_text(&line), "sent bearer ***", &token)?;
    }

    /// In text a URL ends at whitespace, so the password has no whitespace, or no `@` (see
    /// the known limit on `redact_text`).
    #[test]
    fn passwords_in_text_never_show(
        pw in prop_oneof!["[!-~]{1,24}", "[ -?A-~]{1,24}"],
    ) {
        let text = format!("error: `postgres://u:{pw}@h:5432/db`: timed out (attempt 2)");
        assert_hidden(
            &redact_text(&text),
            "error: `postgres://u:***@h:5432/db`: timed out (attempt 2)",
            &pw,
        )?;
        let text = format!("bad DSN host=h password = {} dbname=db: refused", libpq_quoted(&pw));
        assert_hidden(&redact_text(&text), "bad DSN host=h password = '***' dbname=db: refused", &pw)?;
    }
}
