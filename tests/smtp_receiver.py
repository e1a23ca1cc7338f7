"""A real SMTP server for tests/tests/it/channels.rs: aiosmtpd (from PyPI) on 127.0.0.1, STARTTLS
required (with the certificate and key given), one login accepted, and every mail received
written to stdout as one JSON line. Prints `ready` once it listens.

    python smtp_receiver.py PORT CERT_PEM KEY_PEM USER PASSWORD

Installed by scripts/test (and by the test itself when missing) into target/aiosmtpd/venv.
"""

import email
import email.policy
import json
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def main():
    port, cert, key, user, password = sys.argv[1:6]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == user
            and auth_data.password.decode() == password
        )
        return AuthResult(success=ok, auth_data=auth_data)

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            record = {
                "mail_from": envelope.mail_from,
                "rcpt_tos": envelope.rcpt_tos,
                "subject": str(message["subject"]),
                "message_id": str(message["message-id"] or ""),
                "date": str(message["date"] or ""),
                "to": str(message["to"]),
                "body": message.get_body(preferencelist=("plain",)).get_content(),
                "tls": session.ssl is not None,
                "login": (session.login_data or b"").decode() if session.authenticated else None,
            }
            print(json.dumps(record), flush=True)
            return "250 Message accepted for delivery"

    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=int(port),
        tls_context=context,
        require_starttls=True,
        authenticator=authenticator,
        auth_require_tls=True,
        auth_required=True,
    )
    controller.start()
    print("ready", flush=True)
    try:
        # Until the test closes stdin (or kills the process).
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
