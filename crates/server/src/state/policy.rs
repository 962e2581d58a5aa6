//! Server-wide authorization beyond a share's own settings: who is an administrator
//! (`admin users`) and what anonymous and guest sessions may do (`restrict
//! anonymous`, as Samba's option).

use smbx_config::Config;
use smbx_wire::NtStatus;

use super::session::SessionUser;

/// Whether `user` is an administrator: a user (neither guest nor anonymous) named
/// in `admin users`, globally or of any share (case-insensitive, as `valid users`).
pub fn is_admin(config: &Config, user: &SessionUser) -> bool {
    if user.guest || user.anonymous || user.name.is_empty() {
        return false;
    }
    let named = |list: &[String]| list.iter().any(|a| a.eq_ignore_ascii_case(&user.name));
    named(&config.global.admin_users) || config.shares.iter().any(|s| named(&s.admin_users))
}

/// Whether a logon as `user` may complete: `restrict anonymous = 2` refuses
/// anonymous (null) sessions with STATUS_ACCESS_DENIED. SESSION_SETUP calls this
/// before it marks the session valid.
pub fn logon_allowed(config: &Config, user: &SessionUser) -> Result<(), NtStatus> {
    if user.anonymous && config.global.restrict_anonymous >= 2 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// Whether `user` may enumerate shares (srvsvc NetShareEnum / NetShareEnumAll /
/// NetShareGetInfo): with `restrict anonymous` of 1 or more, only a real user may
/// (as Samba, which refuses every session below a user's: anonymous and guest).
pub fn may_enumerate_shares(config: &Config, user: &SessionUser) -> bool {
    config.global.restrict_anonymous == 0 || !(user.anonymous || user.guest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, guest: bool, anonymous: bool) -> SessionUser {
        SessionUser {
            name: name.into(),
            domain: String::new(),
            guest,
            anonymous,
        }
    }

    fn config(restrict: u8) -> Config {
        let text = format!(
            "[global]\nrestrict anonymous = {restrict}\n[a]\npath = /tmp\nadmin users = Root2\n[b]\npath = /tmp\n"
        );
        Config::parse_str(&text, "test").unwrap()
    }

    #[test]
    fn admins_are_named_users() {
        let c = config(0);
        assert!(is_admin(&c, &user("root2", false, false)));
        assert!(!is_admin(&c, &user("alice", false, false)));
        assert!(!is_admin(&c, &user("root2", true, false)));
        assert!(!is_admin(&c, &user("", false, true)));
    }

    #[test]
    fn restrict_anonymous_levels() {
        let anon = user("", false, true);
        let guest = user("nobody", true, false);
        let alice = user("alice", false, false);
        let c0 = config(0);
        assert!(logon_allowed(&c0, &anon).is_ok());
        assert!(may_enumerate_shares(&c0, &anon));
        let c1 = config(1);
        assert!(logon_allowed(&c1, &anon).is_ok());
        assert!(!may_enumerate_shares(&c1, &anon));
        assert!(!may_enumerate_shares(&c1, &guest));
        assert!(may_enumerate_shares(&c1, &alice));
        let c2 = config(2);
        assert_eq!(logon_allowed(&c2, &anon), Err(NtStatus::ACCESS_DENIED));
        assert!(logon_allowed(&c2, &guest).is_ok());
        assert!(logon_allowed(&c2, &alice).is_ok());
    }
}
