//! E-mail over SMTP (`lettre` on rustls): STARTTLS required (or TLS from the first byte), the
//! platform's roots plus an optional private CA, a login if configured. One plain-text mail per
//! alert, to the channel's `to` and the task's owners that are addresses.

use std::time::Duration;

use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::{Alert, EmailSettings, EmailTls, Outcome};

/// The recipients of `alert`: the channel's, then the owners that look like addresses, each once.
fn recipients(mail: &EmailSettings, alert: &Alert) -> Vec<String> {
    let mut to: Vec<String> = Vec::new();
    let owners = alert
        .owners
        .iter()
        .filter(|_| mail.owners_as_recipients)
        .filter(|o| o.parse::<Mailbox>().is_ok() && o.contains('@') && !o.starts_with('@'));
    for address in mail.to.iter().chain(owners) {
        if !to.contains(address) {
            to.push(address.clone());
        }
    }
    to
}

/// The mail's `Message-ID`: the outbox row's id and a digest of the alert, at the sender's
/// domain, the same for every attempt of one delivery (a receiver can tell a resend).
fn message_id(id: &str, from: &Mailbox, alert: &Alert) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{id}\n{}\n{}", alert.kind, alert.when));
    let digest: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    let local: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .collect();
    format!("<scheduler.{local}.{digest}@{}>", from.email.domain())
}

/// Whether `error` says the server offers no STARTTLS: a configuration fault (the channel asks
/// for STARTTLS, the server cannot), not an outage.
fn no_starttls(error: &str) -> bool {
    error.contains("STARTTLS is not supported")
}

pub(super) async fn send(
    mail: &EmailSettings,
    timeout: Duration,
    id: &str,
    alert: &Alert,
) -> Outcome {
    let permanent = |error: String| {
        let mut outcome = Outcome::failed(error);
        outcome.permanent = true;
        outcome
    };
    let to = recipients(mail, alert);
    if to.is_empty() {
        return permanent(
            "no recipient: the channel lists none and the task has no owner address".into(),
        );
    }
    let from: Mailbox = match mail.from.parse() {
        Ok(from) => from,
        Err(e) => return permanent(format!("`from` is not an address: {e}")),
    };
    let mut builder = lettre::Message::builder()
        .message_id(Some(message_id(id, &from, alert)))
        .date_now()
        .from(from)
        .subject(alert.title())
        .header(ContentType::TEXT_PLAIN);
    for address in &to {
        match address.parse::<Mailbox>() {
            Ok(mailbox) => builder = builder.to(mailbox),
            Err(e) => return permanent(format!("`{address}` is not an address: {e}")),
        }
    }
    let message = match builder.body(alert.plain()) {
        Ok(m) => m,
        Err(e) => return permanent(format!("the mail cannot be built: {e}")),
    };
    let mut tls = TlsParameters::builder(mail.host.clone());
    if let Some(pem) = &mail.ca_pem {
        match Certificate::from_pem(pem) {
            Ok(cert) => tls = tls.add_root_certificate(cert),
            Err(e) => return permanent(format!("`ca_file` holds no certificate: {e}")),
        }
    }
    let tls = match tls.build_rustls() {
        Ok(tls) => tls,
        Err(e) => return permanent(format!("TLS set-up failed: {e}")),
    };
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(mail.host.clone())
        .port(mail.port)
        .timeout(Some(timeout))
        .hello_name(ClientId::Domain(
            gethostname::gethostname().to_string_lossy().into_owned(),
        ))
        .tls(match mail.tls {
            EmailTls::StartTls => Tls::Required(tls),
            EmailTls::Implicit => Tls::Wrapper(tls),
        });
    if let (Some(user), Some(password)) = (&mail.username, &mail.password) {
        transport =
            transport.credentials(Credentials::new(user.clone(), password.expose().to_owned()));
    }
    let transport = transport.build();
    // The whole exchange is bounded too (lettre's timeout is per read or write).
    let whole = timeout.saturating_mul(3);
    match tokio::time::timeout(whole, transport.send(message)).await {
        Ok(Ok(response)) => Outcome {
            status: Some(u16::from(response.code())),
            error: None,
            delivered: true,
            gone: false,
            permanent: false,
            retry_after: None,
        },
        Ok(Err(e)) => {
            let status = e.status().map(u16::from);
            let text = crate::redact::redact_text(&crate::causes::error_chain(&e));
            if mail.tls == EmailTls::StartTls && no_starttls(&text) {
                return permanent(format!(
                    "the SMTP server {}:{} does not offer STARTTLS, and mail is never sent in \
                     the clear: a configuration fault (use the server's submission port, or \
                     `tls = \"implicit\"` for port 465), given up, not retried",
                    mail.host, mail.port
                ));
            }
            let mut outcome = Outcome::failed(text);
            outcome.status = status;
            // 5xx replies are permanent for SMTP (a refused recipient, a refused login).
            outcome.permanent = e.is_permanent();
            outcome
        }
        Err(_) => Outcome::failed(format!(
            "the SMTP exchange took longer than {}",
            humantime::format_duration(whole)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_id_is_the_delivery_s_at_the_sender_s_domain() {
        let body = serde_json::json!({"type": "run.failed", "timestamp": "2026-03-01T02:00:00.000Z",
            "data": {"task": "t"}});
        let alert = Alert::from_body(&body.to_string(), None).unwrap();
        let from: Mailbox = "Scheduler <alerts@example.com>".parse().unwrap();
        let id = message_id("msg_42", &from, &alert);
        assert!(
            id.starts_with("<scheduler.msg_42.") && id.ends_with("@example.com>"),
            "{id}"
        );
        assert_eq!(
            id,
            message_id("msg_42", &from, &alert),
            "the same for every attempt"
        );
        assert_ne!(id, message_id("msg_43", &from, &alert));
        assert!(no_starttls(
            "client error: STARTTLS is not supported on this server"
        ));
    }
}
