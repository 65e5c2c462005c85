//! `${VAR}` in string values, read from the environment.
//!
//! Rules: `${NAME}` (NAME = letters, digits, underscores, not starting with
//! a digit) is replaced by the variable's value; `$${` stands for a literal
//! `${`; any other `$` is kept as is. A value read from the environment is
//! not expanded again. An unset variable is an error; a variable set to the
//! empty string gives the empty string (an optional field then counts as
//! unset).

/// Why a string could not be interpolated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InterpolationError {
    /// `${NAME}` where NAME is not set in the environment.
    Missing(String),
    /// `${` without a closing `}` or with a name that is not a variable name.
    Malformed(String),
}

/// Expands `text`; `Ok(None)` when it holds no `$` at all (nothing to do).
pub(crate) fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, Vec<InterpolationError>> {
    if !text.contains('$') {
        return Ok(None);
    }
    let mut out = String::with_capacity(text.len());
    let mut errors = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            match after.find('}') {
                Some(end) if is_var_name(&after[..end]) => {
                    let name = &after[..end];
                    match env(name) {
                        Some(value) => out.push_str(&value),
                        None => errors.push(InterpolationError::Missing(name.to_string())),
                    }
                    rest = &after[end + 1..];
                }
                Some(end) => {
                    errors.push(InterpolationError::Malformed(format!(
                        "${{{}}}",
                        &after[..end]
                    )));
                    rest = &after[end + 1..];
                }
                None => {
                    errors.push(InterpolationError::Malformed(
                        "${ without a closing }".to_string(),
                    ));
                    rest = "";
                }
            }
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    if errors.is_empty() {
        Ok(Some(out))
    } else {
        Err(errors)
    }
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "USER_1" => Some("alice".into()),
            "EMPTY" => Some(String::new()),
            "DOLLAR" => Some("${USER_1}".into()),
            _ => None,
        }
    }

    fn run(text: &str) -> Result<Option<String>, Vec<InterpolationError>> {
        interpolate(text, &env)
    }

    #[test]
    fn replaces_variables_and_keeps_other_dollars() {
        assert_eq!(run("plain"), Ok(None));
        assert_eq!(run("${USER_1}"), Ok(Some("alice".into())));
        assert_eq!(run("a${USER_1}b${EMPTY}c"), Ok(Some("aalicebc".into())));
        assert_eq!(run("cost $5 $x $$"), Ok(Some("cost $5 $x $$".into())));
        // Values from the environment are not expanded again.
        assert_eq!(run("${DOLLAR}"), Ok(Some("${USER_1}".into())));
    }

    #[test]
    fn double_dollar_escapes() {
        assert_eq!(run("$${USER_1}"), Ok(Some("${USER_1}".into())));
        // Read left to right: `$` then the escape `$${`.
        assert_eq!(run("$$${USER_1}"), Ok(Some("$${USER_1}".into())));
        assert_eq!(run("$${NOT_SET}"), Ok(Some("${NOT_SET}".into())));
    }

    #[test]
    fn reports_every_missing_or_malformed_reference() {
        assert_eq!(
            run("${A_MISSING}:${USER_1}:${B_MISSING}"),
            Err(vec![
                InterpolationError::Missing("A_MISSING".into()),
                InterpolationError::Missing("B_MISSING".into()),
            ])
        );
        assert_eq!(
            run("${1BAD}"),
            Err(vec![InterpolationError::Malformed("${1BAD}".into())])
        );
        assert_eq!(
            run("x${USER_1"),
            Err(vec![InterpolationError::Malformed(
                "${ without a closing }".into()
            )])
        );
    }
}
