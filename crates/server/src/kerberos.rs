//! Kerberos on the server: the acceptor settings a configuration asks for
//! (`kerberos method`, `dedicated keytab file`) and the mapping of a ticket's client
//! principal to a local user (`username map`, `realm`).

use smbx_config::{Config, KerberosMethod, UsernameMap};
use smbx_security::auth::KerberosNames;
use smbx_security::kerberos::{split_principal, KerberosAcceptor};

/// The Kerberos acceptor for `config`, or `None` when Kerberos is off
/// (`kerberos method = secrets only`, the default).
pub fn acceptor(config: &Config) -> Option<KerberosAcceptor> {
    let g = &config.global;
    match g.kerberos_method {
        KerberosMethod::SecretsOnly => None,
        KerberosMethod::DedicatedKeytab => {
            Some(KerberosAcceptor::new(g.dedicated_keytab_file.clone()))
        }
        KerberosMethod::SystemKeytab => Some(KerberosAcceptor::new(None)),
    }
}

/// Longest local user name a principal may map to.
const MAX_USER_LEN: usize = 256;

/// The local user a Kerberos logon is for: the `username map` entry for the client
/// principal (`user@REALM`), else, when the realm is ours (`realm`, or the realm of
/// the service principal when `realm` is unset), the entry for `user` or `user`
/// itself. `Err` says why the principal has no local user (for the log).
pub fn local_user(config: &Config, names: &KerberosNames) -> Result<String, String> {
    let g = &config.global;
    let map = match &g.username_map {
        Some(path) => Some(UsernameMap::load(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let (user, realm) = split_principal(&names.client);
    let ours = if g.realm.is_empty() {
        split_principal(&names.service).1.to_string()
    } else {
        g.realm.clone()
    };
    let local = if let Some(u) = map.as_ref().and_then(|m| m.map(&names.client)) {
        u.to_string()
    } else if realm.eq_ignore_ascii_case(&ours) {
        map.as_ref()
            .and_then(|m| m.map(user))
            .unwrap_or(user)
            .to_string()
    } else {
        return Err(format!(
            "principal {} is from realm {realm:?}, not {ours:?}, and no username map entry maps it",
            names.client
        ));
    };
    if local.is_empty()
        || local.len() > MAX_USER_LEN
        || local.contains(['/', '\\', ':', '@'])
        || local.chars().any(char::is_control)
    {
        return Err(format!(
            "principal {} maps to an unusable user name {local:?}",
            names.client
        ));
    }
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(client: &str) -> KerberosNames {
        KerberosNames {
            client: client.into(),
            service: "cifs/srv.example.test@EXAMPLE.TEST".into(),
        }
    }

    fn config(extra: &str) -> Config {
        Config::parse_str(&format!("[global]\n{extra}\n"), "t.conf").unwrap()
    }

    #[test]
    fn users_of_our_realm_keep_their_name() {
        let c = config("");
        assert_eq!(
            local_user(&c, &names("alice@EXAMPLE.TEST")).unwrap(),
            "alice"
        );
        assert!(local_user(&c, &names("alice@OTHER.TEST")).is_err());
        let c = config("realm = other.test");
        assert_eq!(local_user(&c, &names("alice@OTHER.TEST")).unwrap(), "alice");
        assert!(local_user(&c, &names("alice@EXAMPLE.TEST")).is_err());
        // Instance components never become a user name by themselves.
        assert!(local_user(&config(""), &names("host/x@EXAMPLE.TEST")).is_err());
    }

    #[test]
    fn the_username_map_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("users.map");
        std::fs::write(&map, "bob = carol@OTHER.TEST\nroot = admin\n").unwrap();
        let c = config(&format!("username map = {}", map.display()));
        assert_eq!(local_user(&c, &names("carol@OTHER.TEST")).unwrap(), "bob");
        assert_eq!(
            local_user(&c, &names("admin@EXAMPLE.TEST")).unwrap(),
            "root"
        );
        assert_eq!(local_user(&c, &names("dave@EXAMPLE.TEST")).unwrap(), "dave");
        assert!(local_user(&c, &names("admin@OTHER.TEST")).is_err());
        std::fs::write(&map, "broken line\n").unwrap();
        let e = local_user(&c, &names("dave@EXAMPLE.TEST")).unwrap_err();
        assert!(e.contains("users.map:1"), "{e}");
    }

    #[test]
    fn kerberos_is_off_by_default() {
        assert!(acceptor(&config("")).is_none());
        let a = acceptor(&config(
            "kerberos method = dedicated keytab\ndedicated keytab file = /k.keytab",
        ))
        .unwrap();
        assert_eq!(a.keytab.as_deref(), Some(std::path::Path::new("/k.keytab")));
        assert_eq!(a.service, "cifs");
        assert!(acceptor(&config("kerberos method = system keytab"))
            .unwrap()
            .keytab
            .is_none());
    }
}
