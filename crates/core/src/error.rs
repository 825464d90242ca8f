//! The error of a configuration that cannot run: which setting, and what is valid.

use thiserror::Error;

/// An invalid setting of a policy, workload, machine or daemon configuration. Its
/// message is one line naming the setting (as the user writes it, e.g.
/// `policy.cbf_hashes`) and what is valid, so the CLI prints it as it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A number outside its valid range.
    #[error("{key} must be in {valid}, got {got}")]
    OutOfRange {
        /// The setting, e.g. `policy.cbf_hashes`.
        key: String,
        /// The valid range, e.g. `1..=8`.
        valid: String,
        /// The value given.
        got: String,
    },
    /// Any other broken rule (a combination of settings, a list's shape, a name); the
    /// message names the setting and what is valid.
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    /// `key` must lie in `lo..=hi` but is `got`.
    pub fn out_of_range(
        key: impl Into<String>,
        lo: impl std::fmt::Display,
        hi: impl std::fmt::Display,
        got: impl std::fmt::Display,
    ) -> ConfigError {
        ConfigError::OutOfRange {
            key: key.into(),
            valid: format!("{lo}..={hi}"),
            got: got.to_string(),
        }
    }

    /// The same error with `prefix` before the setting's name (a nested section, as
    /// `policy.` before a kswapd setting).
    pub fn prefixed(self, prefix: &str) -> ConfigError {
        match self {
            ConfigError::OutOfRange { key, valid, got } => ConfigError::OutOfRange {
                key: format!("{prefix}{key}"),
                valid,
                got,
            },
            ConfigError::Invalid(m) => ConfigError::Invalid(format!("{prefix}{m}")),
        }
    }
}

/// A message already naming the setting and what is valid.
impl From<String> for ConfigError {
    fn from(message: String) -> ConfigError {
        ConfigError::Invalid(message)
    }
}

/// A fixed message naming the setting and what is valid.
impl From<&str> for ConfigError {
    fn from(message: &str) -> ConfigError {
        ConfigError::Invalid(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_naming_the_setting_and_what_is_valid() {
        let e = ConfigError::out_of_range("policy.cbf_hashes", 1, 8, 9);
        assert_eq!(e.to_string(), "policy.cbf_hashes must be in 1..=8, got 9");
        let e = ConfigError::out_of_range("hashes", 1, 8, 0).prefixed("policy.");
        assert_eq!(e.to_string(), "policy.hashes must be in 1..=8, got 0");
        let e: ConfigError = "policy.x must be set".to_string().into();
        assert_eq!(e.to_string(), "policy.x must be set");
    }
}
