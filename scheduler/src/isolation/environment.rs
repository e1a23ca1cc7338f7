//! What an isolated run's child gets of the node's environment: all of it but the node's
//! secrets ([`crate::vars::SECRETS`] and the variables a channels file named with `env:`), plus
//! its request. See `docs/isolation.md`.

/// Removes the node's secrets from what `command` passes on.
pub(crate) fn keep_secrets_home(command: &mut std::process::Command) {
    for name in crate::vars::secret_names() {
        command.env_remove(name);
    }
}
