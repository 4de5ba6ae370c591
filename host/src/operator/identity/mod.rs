//! Whose identity a module's requests go out with. By default each module
//! acts as its own ServiceAccount (Kubernetes impersonation: the operator's
//! role may only `impersonate` those), so a module can write only what its
//! own Role grants, whatever the operator's role allows; and it is refused
//! at load or at swap when that Role does not grant what its manifest claims
//! (`access.rs`). The parent's and the children's writes are the module's;
//! the operator's own requests (watches of the shared caches, events, the
//! Lease, LogicModule status, reviews) stay the operator's.

mod access;

#[cfg(test)]
pub(crate) use access::test_manifest;
pub use access::{AccessError, Permission, needed_permissions};

use http::{HeaderValue, Request};
use kube::Client;

use crate::runtime::logic_module::LogicModule;

/// Who a module's writes are made as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleIdentity {
    /// The operator's own identity (for clusters that forbid impersonation):
    /// every module may then do all that the operator's role allows.
    Operator,
    /// The ServiceAccount named `prefix` + the module's manifest `name` in
    /// `namespace`, impersonated. The prefix (empty by default) lets two
    /// operators whose modules share a name keep their accounts apart in one
    /// namespace (two Helm releases there).
    ServiceAccounts { namespace: String, prefix: String },
}

/// How one module reaches the API server for its writes: the client, and
/// the user it acts as (none: the operator's own).
#[derive(Clone)]
pub struct ModuleClient {
    pub client: Client,
    /// The operator's own client, for what the host writes about the module
    /// rather than for it (its LogicModule's status).
    pub operator: Client,
    /// `system:serviceaccount:NAMESPACE:NAME`, when impersonating.
    pub user: Option<String>,
    /// Where the operator acts: one namespace, or all of them.
    namespace: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "module {module}: {account:?}{} is not a ServiceAccount name (lowercase letters, digits, '-' and '.', \
         at most 253), which --module-identity=service-account needs",
        if *.prefixed { " (--module-identity-prefix, then the module's name)" } else { "" }
    )]
    NotAServiceAccountName { module: String, account: String, prefixed: bool },
}

impl ModuleIdentity {
    /// The client `module`'s writes go through, sharing `operator`'s
    /// connections; watching `namespace` (all when `None`).
    pub fn client_for(
        &self,
        operator: &Client,
        module: &str,
        namespace: Option<&str>,
    ) -> Result<ModuleClient, IdentityError> {
        let namespace = namespace.map(str::to_owned);
        match self {
            ModuleIdentity::Operator => {
                Ok(ModuleClient { client: operator.clone(), operator: operator.clone(), user: None, namespace })
            }
            ModuleIdentity::ServiceAccounts { namespace: accounts, prefix } => {
                let account = module_account(prefix, module)?;
                let user = format!("system:serviceaccount:{accounts}:{account}");
                let header = HeaderValue::from_str(&user)
                    .map_err(|_| IdentityError::not_a_service_account_name(prefix, module, account.clone()))?;
                Ok(ModuleClient {
                    client: impersonating(operator, header),
                    operator: operator.clone(),
                    user: Some(user),
                    namespace,
                })
            }
        }
    }
}

impl ModuleClient {
    /// Whether this module's identity may do everything the host does for
    /// `module` (`needed_permissions`); nothing to check when it acts as
    /// the operator.
    pub async fn check(&self, module: &LogicModule) -> Result<(), AccessError> {
        match &self.user {
            None => Ok(()),
            Some(user) => {
                let namespace = self.namespace.as_deref();
                access::check(
                    &self.client,
                    user,
                    module.manifest(),
                    (module.write_model(), module.finalizes()),
                    namespace,
                )
                .await
            }
        }
    }
}

/// The ServiceAccount `module` acts as: `prefix`, then the module's name;
/// refused unless a ServiceAccount may have that name.
pub fn module_account(prefix: &str, module: &str) -> Result<String, IdentityError> {
    let account = format!("{prefix}{module}");
    if is_service_account_name(&account) {
        Ok(account)
    } else {
        Err(IdentityError::not_a_service_account_name(prefix, module, account))
    }
}

impl IdentityError {
    fn not_a_service_account_name(prefix: &str, module: &str, account: String) -> Self {
        IdentityError::NotAServiceAccountName { module: module.to_owned(), account, prefixed: !prefix.is_empty() }
    }
}

/// `operator`'s client, each request made as `user`: the API server
/// authorizes it as `user` once it has checked that the operator may
/// impersonate it. The service accounts' groups are added by the API server.
fn impersonating(operator: &Client, user: HeaderValue) -> Client {
    let base = operator.clone();
    let service = tower::service_fn(move |mut request: Request<kube::client::Body>| {
        request.headers_mut().insert("impersonate-user", user.clone());
        let base = base.clone();
        async move { base.send(request).await }
    });
    Client::new(service, operator.default_namespace())
}

/// A DNS subdomain (RFC 1123), as ServiceAccount names are.
fn is_service_account_name(name: &str) -> bool {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_names_are_dns_subdomains() {
        for good in ["memcached", "static-site", "a.b-c", "x1"] {
            assert!(is_service_account_name(good), "{good}");
        }
        for bad in ["", "Memcached", "-a", "a-", "a..b", "a_b", "a b", &"a".repeat(254)] {
            assert!(!is_service_account_name(bad), "{bad}");
        }
    }

    /// A client that never reaches a server: `client_for` sends nothing.
    fn unreachable_client() -> Client {
        let service = tower::service_fn(|_: Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other("no server in this test"))
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn the_prefix_comes_before_the_module_name_in_the_account() {
        let operator = unreachable_client();
        let identity =
            |prefix: &str| ModuleIdentity::ServiceAccounts { namespace: "ops".into(), prefix: prefix.into() };
        let plain = identity("").client_for(&operator, "memcached", None).expect("a client");
        assert_eq!(plain.user.as_deref(), Some("system:serviceaccount:ops:memcached"));
        let prefixed = identity("team-b-").client_for(&operator, "memcached", None).expect("a client");
        assert_eq!(prefixed.user.as_deref(), Some("system:serviceaccount:ops:team-b-memcached"));
        // The whole name must be one a ServiceAccount can have; the error
        // names the module and the account it would have been.
        let refused = identity("Team-").client_for(&operator, "memcached", None).err().expect("refused");
        let message = refused.to_string();
        assert!(message.contains("module memcached") && message.contains("\"Team-memcached\""), "{message}");
        assert!(message.contains("--module-identity-prefix"), "{message}");
        let unprefixed = identity("").client_for(&operator, "Greeting", None).err().expect("refused").to_string();
        assert!(unprefixed.contains("module Greeting: \"Greeting\" is not"), "{unprefixed}");
        assert!(!unprefixed.contains("prefix"), "no prefix was given: {unprefixed}");
        let too_long = identity(&"a".repeat(250)).client_for(&operator, "memcached", None);
        assert!(too_long.is_err(), "a 259-character account name was accepted");
        assert!(ModuleIdentity::Operator.client_for(&operator, "memcached", None).expect("a client").user.is_none());
    }
}
