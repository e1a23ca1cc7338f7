use super::*;

fn hosts(info: &ConnInfo) -> Vec<(String, Option<u16>)> {
    info.hosts
        .iter()
        .map(|h| (h.host.clone(), h.port))
        .collect()
}

fn error(s: &str) -> String {
    parse(s).unwrap_err().to_string()
}

#[test]
fn a_url_with_one_host_is_kept_as_written() {
    let info = parse("postgres://app:pw@db:5433/jobs?sslmode=require").unwrap();
    assert_eq!(hosts(&info), [("db".into(), Some(5433))]);
    assert_eq!(info.url, "postgres://app:pw@db:5433/jobs?sslmode=require");
}

#[test]
fn a_host_list_with_ports_each() {
    let info = parse(
        "postgres://app:s3cret@h1:5432,h2:5433,[::1]:5434/app?target_session_attrs=read-write",
    )
    .unwrap();
    assert_eq!(
        hosts(&info),
        [
            ("h1".into(), Some(5432)),
            ("h2".into(), Some(5433)),
            ("::1".into(), Some(5434))
        ]
    );
    assert_eq!(info.target, Some(TargetSessionAttrs::ReadWrite));
    assert_eq!(info.url, "postgres://app:s3cret@h1:5432/app");
}

#[test]
fn a_host_list_with_a_port_parameter() {
    let info = parse("postgres://h1,h2/app?port=5001,5002&application_name=x").unwrap();
    assert_eq!(
        hosts(&info),
        [("h1".into(), Some(5001)), ("h2".into(), Some(5002))]
    );
    assert_eq!(info.url, "postgres://h1:5001/app?application_name=x");
    let one_port = parse("postgres://h1,h2/app?port=6000").unwrap();
    assert_eq!(
        hosts(&one_port),
        [("h1".into(), Some(6000)), ("h2".into(), Some(6000))]
    );
    let default_port = parse("postgres://h1:6000,h2/app").unwrap();
    assert_eq!(
        hosts(&default_port),
        [("h1".into(), Some(6000)), ("h2".into(), None)]
    );
}

#[test]
fn the_keyword_form() {
    let info = parse(
        "host=h1,h2 port=5432,5433 dbname=app user=app password='it\\'s s3cret' \
             target_session_attrs=primary load_balance_hosts=random connect_timeout=3",
    )
    .unwrap();
    assert_eq!(
        hosts(&info),
        [("h1".into(), Some(5432)), ("h2".into(), Some(5433))]
    );
    assert_eq!(info.target, Some(TargetSessionAttrs::Primary));
    assert!(info.load_balance);
    assert_eq!(info.connect_timeout, Some(Duration::from_secs(3)));
    let parsed = url::Url::parse(&info.url).unwrap();
    assert_eq!(parsed.username(), "app");
    assert_eq!(
        percent_decode(parsed.password().unwrap()),
        "it's s3cret",
        "{}",
        info.url
    );
    assert_eq!(parsed.path(), "/app");
    assert!(is_keyword_form("host=db dbname=x"));
    assert!(is_keyword_form("  dbname = x"));
    assert!(!is_keyword_form("postgres://db/x?host=y"));
    assert!(!is_keyword_form("scheduler.db"));
}

#[test]
fn a_socket_directory_host() {
    let info = parse("host=/var/run/postgresql dbname=app").unwrap();
    assert_eq!(hosts(&info), [("/var/run/postgresql".into(), None)]);
    assert!(
        info.url.contains("host=%2Fvar%2Frun%2Fpostgresql"),
        "{}",
        info.url
    );
}

#[test]
fn every_target_and_the_libpq_timeout_rules() {
    for target in [
        TargetSessionAttrs::Any,
        TargetSessionAttrs::ReadWrite,
        TargetSessionAttrs::ReadOnly,
        TargetSessionAttrs::Primary,
        TargetSessionAttrs::Standby,
        TargetSessionAttrs::PreferStandby,
    ] {
        let info = parse(&format!(
            "postgres://h1,h2/x?target_session_attrs={}",
            target.name()
        ))
        .unwrap();
        assert_eq!(info.target, Some(target));
    }
    let timeout = |v: &str| {
        parse(&format!("postgres://h/x?connect_timeout={v}"))
            .unwrap()
            .connect_timeout
    };
    assert_eq!(timeout("0"), None);
    assert_eq!(timeout("-1"), None);
    assert_eq!(timeout("1"), Some(Duration::from_secs(2)));
    assert_eq!(timeout("10"), Some(Duration::from_secs(10)));
    assert!(
        !parse("postgres://h/x?load_balance_hosts=disable")
            .unwrap()
            .load_balance
    );
}

#[test]
fn errors_name_the_part_and_never_the_password() {
    for (url, expected) in [
        (
            "postgres://app:s3cret@h1:5432,h2:nope/x",
            "port of host 2 of the URL (`nope`)",
        ),
        (
            "postgres://app:s3cret@h1,h2,h3/x?port=1,2",
            "port lists 2 ports for 3 hosts",
        ),
        (
            "postgres://app:s3cret@h1,h2/x?target_session_attrs=writable",
            "target_session_attrs `writable`",
        ),
        (
            "postgres://app:s3cret@h1,h2/x?load_balance_hosts=yes",
            "load_balance_hosts `yes`",
        ),
        (
            "postgres://app:s3cret@h1/x?connect_timeout=soon",
            "connect_timeout `soon`",
        ),
        ("postgres://app:s3cret@h1,,h2/x", "empty entry"),
        ("postgres://app:s3cret@[::1/x", "unclosed `[`"),
        (
            "host=h1 password='s3cret",
            "value of `password` has an unclosed quote",
        ),
        ("host=h1 password", "keyword `password` has no `=`"),
        ("postgres://app:s3cret@h1:0/x", "port of host 1"),
    ] {
        let message = error(url);
        assert!(message.contains(expected), "{url}: {message}");
        assert!(!message.contains("s3cret"), "{url}: {message}");
    }
}
