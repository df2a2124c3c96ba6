//! Scopes (`read` ⊂ `write` ⊂ `approve`) and RBAC permission strings, with their comma-joined
//! wire forms.

use std::collections::BTreeSet;
use std::fmt;

use super::AuthError;

/// One access scope: the contract's type (`turnstone_proto::routes`, whose route tables
/// name it), re-exported so that auth code reads `turnstone_runtime::auth::Scope`.
pub use turnstone_proto::routes::{Scope, UnknownScope};

impl From<UnknownScope> for AuthError {
    fn from(e: UnknownScope) -> Self {
        AuthError::UnknownScope(e.0)
    }
}

/// A set of scopes. Its wire form is the names comma-joined in alphabetical order
/// (`approve,read,write`), which is what [`fmt::Display`] produces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Scopes {
    read: bool,
    write: bool,
    approve: bool,
}

impl Scopes {
    pub const fn empty() -> Self {
        Self {
            read: false,
            write: false,
            approve: false,
        }
    }

    /// `{read}` — the role `read` of a config token.
    pub const fn read_only() -> Self {
        Self {
            read: true,
            write: false,
            approve: false,
        }
    }

    /// `{read, write, approve}` — the role `full` of a config token.
    pub const fn full() -> Self {
        Self {
            read: true,
            write: true,
            approve: true,
        }
    }

    /// Parses the comma-joined wire form. Blank items and unknown names are ignored (a token
    /// minted by a newer peer must not become unusable because of a scope we do not know).
    /// The result is *not* expanded; call [`Scopes::expand`] for that.
    pub fn parse(wire: &str) -> Self {
        wire.split(',')
            .filter_map(|item| item.parse::<Scope>().ok())
            .collect()
    }

    pub fn insert(&mut self, scope: Scope) {
        match scope {
            Scope::Read => self.read = true,
            Scope::Write => self.write = true,
            Scope::Approve => self.approve = true,
        }
    }

    /// Literal membership, without the hierarchy.
    pub fn contains(&self, scope: Scope) -> bool {
        match scope {
            Scope::Read => self.read,
            Scope::Write => self.write,
            Scope::Approve => self.approve,
        }
    }

    /// Adds every scope implied by the hierarchy (`approve` → `write`, `read`; `write` →
    /// `read`).
    pub fn expand(self) -> Self {
        Self {
            read: self.read || self.write || self.approve,
            write: self.write || self.approve,
            approve: self.approve,
        }
    }

    /// True if this set grants `scope`, directly or through the hierarchy.
    pub fn has(&self, scope: Scope) -> bool {
        self.iter().any(|held| held.implies(scope))
    }

    pub fn is_empty(&self) -> bool {
        !(self.read || self.write || self.approve)
    }

    /// The scopes held, in hierarchy order (`read`, `write`, `approve`).
    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        Scope::ALL.into_iter().filter(|s| self.contains(*s))
    }

    /// Scopes derived from RBAC permissions (password and OIDC logins): `read`/`write`/
    /// `approve` permissions count as those scopes, any `admin.*` permission grants
    /// `approve`; the result is expanded, and an empty result becomes `{read}`.
    pub fn from_permissions<'a>(permissions: impl IntoIterator<Item = &'a str>) -> Self {
        let mut scopes = Scopes::empty();
        for permission in permissions {
            let permission = permission.trim();
            if permission.starts_with("admin.") {
                scopes.insert(Scope::Approve);
            } else if let Ok(scope) = permission.parse::<Scope>() {
                scopes.insert(scope);
            }
        }
        if scopes.is_empty() {
            Scopes::read_only()
        } else {
            scopes.expand()
        }
    }
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        let mut scopes = Scopes::empty();
        for scope in iter {
            scopes.insert(scope);
        }
        scopes
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Alphabetical order of the names, as the original writes them.
        let names: Vec<&str> = [Scope::Approve, Scope::Read, Scope::Write]
            .into_iter()
            .filter(|s| self.contains(*s))
            .map(Scope::as_str)
            .collect();
        f.write_str(&names.join(","))
    }
}

/// A set of RBAC permission strings (`admin.users`, `conversation.modify`, …). Its wire form is
/// the names comma-joined in sorted order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Permissions(BTreeSet<String>);

impl Permissions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the comma-joined wire form; blank items are dropped.
    pub fn parse(wire: &str) -> Self {
        wire.split(',').collect()
    }

    pub fn contains(&self, permission: &str) -> bool {
        self.0.contains(permission)
    }

    pub fn insert(&mut self, permission: impl Into<String>) {
        let permission = permission.into();
        let permission = permission.trim();
        if !permission.is_empty() {
            self.0.insert(permission.to_string());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl<S: Into<String>> FromIterator<S> for Permissions {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut permissions = Permissions::new();
        for permission in iter {
            permissions.insert(permission);
        }
        permissions
    }
}

impl fmt::Display for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchy_is_read_write_approve() {
        assert!(Scope::Approve.implies(Scope::Write));
        assert!(Scope::Approve.implies(Scope::Read));
        assert!(Scope::Write.implies(Scope::Read));
        assert!(!Scope::Read.implies(Scope::Write));
        assert!(!Scope::Write.implies(Scope::Approve));
    }

    #[test]
    fn parse_ignores_blanks_unknowns_and_case() {
        let s = Scopes::parse(" Write, ,bogus,read");
        assert!(s.contains(Scope::Read));
        assert!(s.contains(Scope::Write));
        assert!(!s.contains(Scope::Approve));
        assert_eq!(Scopes::parse(""), Scopes::empty());
    }

    #[test]
    fn expand_follows_the_hierarchy() {
        assert_eq!(Scopes::parse("approve").expand(), Scopes::full());
        assert_eq!(Scopes::parse("write").expand().to_string(), "read,write");
        assert_eq!(Scopes::parse("read").expand().to_string(), "read");
        assert_eq!(Scopes::empty().expand(), Scopes::empty());
    }

    #[test]
    fn has_uses_the_hierarchy_even_unexpanded() {
        let approve = Scopes::parse("approve");
        assert!(approve.has(Scope::Read) && approve.has(Scope::Write));
        assert!(!approve.contains(Scope::Read));
        let read = Scopes::read_only();
        assert!(read.has(Scope::Read));
        assert!(!read.has(Scope::Write));
        assert!(!Scopes::empty().has(Scope::Read));
    }

    #[test]
    fn wire_form_is_sorted_alphabetically() {
        assert_eq!(Scopes::full().to_string(), "approve,read,write");
        assert_eq!(Scopes::parse("write,approve").to_string(), "approve,write");
        assert_eq!(Scopes::empty().to_string(), "");
    }

    #[test]
    fn scopes_from_permissions() {
        assert_eq!(Scopes::from_permissions(["admin.users"]), Scopes::full());
        assert_eq!(
            Scopes::from_permissions(["write", "workstreams.create"]).to_string(),
            "read,write"
        );
        assert_eq!(Scopes::from_permissions([]), Scopes::read_only());
        assert_eq!(
            Scopes::from_permissions(["conversation.modify"]),
            Scopes::read_only()
        );
    }

    #[test]
    fn permissions_wire_form() {
        let p = Permissions::parse("write, admin.users,,read");
        assert_eq!(p.to_string(), "admin.users,read,write");
        assert!(p.contains("admin.users"));
        assert!(Permissions::parse(" , ").is_empty());
    }
}
