//! The translation, rule by rule: nginx text in, TOML and reports out.
