//! Name and label syntax as apimachinery's `k8s.io/apimachinery/pkg/util/validation` defines it:
//! DNS-1123 labels and subdomains, qualified names (label keys), label values. The bottom of the
//! fake's validation, shared by [`crate::validation`] and [`crate::config_objects`].

pub const DNS1123_LABEL_MAX: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
pub const QUALIFIED_NAME_MAX: usize = 63;
pub const LABEL_VALUE_MAX: usize = 63;

fn alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// An ASCII letter or digit.
pub fn alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && alnum_lower(b[0])
        && alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| alnum_lower(c) || c == b'-')
}

/// apimachinery's `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        out.push(format!("must be no more than {DNS1123_LABEL_MAX} characters"));
    }
    if !is_label_syntax(s) {
        out.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into());
    }
    out
}

/// apimachinery's `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        out.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    if !s.split('.').all(is_label_syntax) {
        out.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into());
    }
    out
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_string());
            } else {
                out.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            name
        }
        _ => {
            out.push(format!("a qualified name {QUALIFIED_NAME_ERR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        out.push(format!("name part must be no more than {QUALIFIED_NAME_MAX} characters"));
    }
    if !name.is_empty() && !is_name_part(name) {
        out.push(format!("name part {QUALIFIED_NAME_ERR}"));
    }
    out
}

/// apimachinery's `IsValidLabelValue`.
pub fn label_value(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > LABEL_VALUE_MAX {
        out.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !s.is_empty() && !is_name_part(s) {
        out.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into());
    }
    out
}
